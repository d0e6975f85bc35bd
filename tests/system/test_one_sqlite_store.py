"""Two `serve` processes on one SQLite store (a desktop host's stdio gateway and `scripts/serve` started in the
same folder): the second is refused at start with a sentence naming the first, so it neither settles the first
one's key in flight as unknown nor lets two writes planned at one version both apply. Once the first stops, the
store can be served again."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

import anyio
import pytest

from tests.support.clients import Answers, error_code, http_client, new_key, preview
from tests.support.configs import write_config
from tests.support.processes import PYTHON, free_port, serve, serve_args, until
from tests.support.profiles import TENANTS

pytestmark = pytest.mark.anyio

PROFILE = TENANTS  # the store is under test, not the mapping


def key_state(store: Path, key: str) -> str | None:
    with sqlite3.connect(store) as conn:
        row = conn.execute("SELECT state FROM idempotency WHERE key = ?", (key,)).fetchone()
    return None if row is None else str(row[0])


async def audit_of(config: Path, key: str) -> list[tuple[str, str | None]]:
    listed = await anyio.run_process([PYTHON, "-m", "gateway", "audit", "list", "--json", "--config", str(config)])
    entries = [json.loads(line) for line in listed.stdout.decode().splitlines()]
    return [(e["outcome"], e["code"]) for e in entries if e["idempotency_key"] == key]


@pytest.mark.parametrize("second", ["stdio", "http"])
async def test_a_second_serve_on_one_sqlite_store_is_refused_and_the_first_ones_write_keeps_one_true_record(
    tmp_path: Path, era: str, second: str
) -> None:
    config = write_config(PROFILE, tmp_path, *PROFILE.seed_demo, "--fault", "latency=8000")
    store, db = tmp_path / "gateway.db", tmp_path / "backend.db"
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    async with serve(config, port) as first:
        async with http_client(era, url, Answers()) as client:
            plan = await preview(client, PROFILE)
            rival = await preview(client, PROFILE)  # planned at the same version: one of the two must be stale
        args = {"planId": plan["planId"], "idempotencyKey": new_key()}
        results = []

        async def write() -> None:
            async with http_client(era, url, Answers()) as writer:
                results.append(await writer.call_tool(PROFILE.write_tool, args))

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(write)
            await until(lambda: key_state(store, args["idempotencyKey"]) == "in_flight")
            extra = ["--stdio"] if second == "stdio" else []
            command = serve_args(config, free_port(), *extra)
            with anyio.fail_after(60):
                refused = await anyio.run_process(command, check=False, stdin=subprocess.DEVNULL)
            assert refused.returncode == 2
            assert f"pid {first.pid}" in refused.stderr.decode()  # the sentence names the process holding it
            assert key_state(store, args["idempotencyKey"]) == "in_flight"  # not settled unknown by the second
        assert results[0].structured_content is not None and results[0].structured_content["replayed"] is False
        async with http_client(era, url, Answers()) as client:
            stale = await client.call_tool(PROFILE.write_tool, {"planId": rival["planId"], "idempotencyKey": new_key()})
        assert error_code(stale) == "plan_stale"
    assert PROFILE.write_count(db) == 1
    assert await audit_of(config, args["idempotencyKey"]) == [("applied", None)]

    # The first one stopped: the store is free again, and nothing was left in flight to recover.
    port = free_port()
    async with serve(config, port, stderr=subprocess.PIPE) as again:
        async with http_client(era, f"http://127.0.0.1:{port}/mcp", Answers()) as client:
            replay = await client.call_tool(PROFILE.write_tool, args)
        assert replay.structured_content is not None and replay.structured_content["replayed"] is True
        assert again.poll() is None
    assert await audit_of(config, args["idempotencyKey"]) == [("applied", None), ("replayed", None)]
