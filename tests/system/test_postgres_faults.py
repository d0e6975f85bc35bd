"""A PostgreSQL store that goes away around a write, behind a real `serve` and a real backend over HTTP: down
before the claim, the write is refused store_unavailable and nothing is sent; restarted while the backend
writes, the caller hears what the backend did, the process keeps the outcome the database could not take, and
the retry once the database is back stores it and replays it; its connections dropped mid-write, the outcome is
recorded on a fresh connection and the retry replays. Never a hang, never a second write."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import mcp.types as types
import psycopg
import pytest
from mcp import Client

from gateway.stores.leases import LEASE_MARGIN_SECONDS
from tests.support.clients import error_code, http_client, new_key, preview
from tests.support.configs import config_data, write_toml
from tests.support.postgres import PostgresServer
from tests.support.processes import PYTHON, free_port, process, serve, until
from tests.support.profiles import TENANTS

pytestmark = pytest.mark.anyio

PROFILE = TENANTS  # the store is under test, not the mapping
SHORT_CALL = 3.0
LATENCY_MS = 1500


@asynccontextmanager
async def gateway_on(tmp: Path, store: str, era: str) -> AsyncIterator[tuple[Client, Path]]:
    """A served gateway on ``store`` over a backend whose every write takes LATENCY_MS; a client; the backend log."""
    db, backend, port, log = tmp / "backend.db", free_port(), free_port(), tmp / "backend.log"
    url = f"{store}&timeout=2&lock_lease={SHORT_CALL + LEASE_MARGIN_SECONDS + 0.5}"
    data = config_data(
        PROFILE,
        db,
        store=url,
        state_dir=tmp / "state",
        backend={"transport": "http", "url": f"http://127.0.0.1:{backend}/mcp", "call_timeout_seconds": SHORT_CALL},
    )
    data["backend"] = {k: v for k, v in data["backend"].items() if v is not None}
    config = write_toml(data, tmp / "gateway.toml")
    command = [PYTHON, "-m", PROFILE.backend_module, "--http", f"127.0.0.1:{backend}", "--db", str(db)]
    with log.open("wb") as stderr:
        async with (
            process([*command, *PROFILE.seed_demo, "--fault", f"latency={LATENCY_MS}"], backend, stderr=stderr),
            serve(config, port),
            http_client(era, f"http://127.0.0.1:{port}/mcp") as client,
        ):
            yield client, log


def fires(log: Path) -> int:
    """How many writes the backend has begun (its latency fault fires on each)."""
    return log.read_bytes().count(b"fault latency fired")


async def write_while(
    client: Client, log: Path, args: dict[str, str], fault: Callable[[], object]
) -> types.CallToolResult:
    """Call the write; once the backend has it (its latency fault fired), run ``fault``; the write's answer."""
    answers: list[types.CallToolResult] = []
    fired = fires(log)
    with anyio.fail_after(60):
        async with anyio.create_task_group() as tasks:

            async def call() -> None:
                answers.append(await client.call_tool(PROFILE.write_tool, args))

            tasks.start_soon(call)
            await until(lambda: fires(log) > fired)
            await anyio.to_thread.run_sync(fault)
    return answers[0]


async def test_a_database_down_before_the_claim_or_restarted_mid_write_never_writes_a_key_twice(
    tmp_path: Path, postgres_server: PostgresServer, postgres_url: str, era: str
) -> None:
    try:
        async with gateway_on(tmp_path, postgres_url, era) as (client, log):
            args = {"planId": (await preview(client, PROFILE))["planId"], "idempotencyKey": new_key()}
            postgres_server.stop("immediate")
            with anyio.fail_after(30):
                down = await client.call_tool(PROFILE.write_tool, args)
            assert error_code(down) == "store_unavailable"
            assert PROFILE.write_count(tmp_path / "backend.db") == 0
            postgres_server.start()

            # Restarted while the backend writes: the settle cannot reach it, so the caller is told what the
            # backend did, and the process keeps the outcome until the database takes it.
            first = await write_while(client, log, args, lambda: postgres_server.stop("immediate"))
            assert not first.is_error and first.structured_content is not None
            assert first.structured_content["replayed"] is False
            postgres_server.start()
            with anyio.fail_after(60):
                while True:
                    retry = await client.call_tool(PROFILE.write_tool, args)
                    if not retry.is_error or error_code(retry) != "store_unavailable":
                        break
                    await anyio.sleep(0.2)
            assert retry.structured_content == {**first.structured_content, "replayed": True}
    finally:
        if not postgres_server.running():
            postgres_server.start()
    assert PROFILE.write_count(tmp_path / "backend.db") == 1


async def test_connections_dropped_mid_write_record_the_outcome_once_and_the_retry_replays(
    tmp_path: Path, postgres_server: PostgresServer, postgres_url: str, era: str
) -> None:
    def drop_every_connection() -> None:
        with psycopg.connect(postgres_server.url, autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
            )

    async with gateway_on(tmp_path, postgres_url, era) as (client, log):
        args = {"planId": (await preview(client, PROFILE))["planId"], "idempotencyKey": new_key()}
        first = await write_while(client, log, args, drop_every_connection)
        with anyio.fail_after(30):
            retry = await client.call_tool(PROFILE.write_tool, args)
    assert first.structured_content is not None and first.structured_content["replayed"] is False
    assert retry.structured_content == {**first.structured_content, "replayed": True}
    assert PROFILE.write_count(tmp_path / "backend.db") == 1
