"""A Redis store that stops answering, or fails over, behind real `serve` processes: a paused Redis refuses calls
within seconds and nothing is written, then it recovers by itself; a claim no replica acknowledged is refused;
a primary killed between claim and settle never lets a key write twice; a lock lease shorter than the longest
write timeout is refused at start."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
import redis

from tests.support.clients import error_code, http_client, new_key, preview
from tests.support.configs import config_data, write_toml
from tests.support.processes import PYTHON, free_port, http_backend, serve, until
from tests.support.profiles import TENANTS
from tests.support.redis import redis_process, sentinel_group

pytestmark = pytest.mark.anyio

PROFILE = TENANTS  # the store is under test, not the mapping


def gateway_toml(tmp: Path, store: str, backend_port: int, **backend: Any) -> Path:
    data = config_data(
        PROFILE,
        tmp / "backend.db",
        store=store,
        state_dir=tmp / "state",
        backend={"transport": "http", "url": f"http://127.0.0.1:{backend_port}/mcp", **backend},
    )
    data["backend"] = {k: v for k, v in data["backend"].items() if v is not None}
    return write_toml(data, tmp / "gateway.toml")


async def test_a_paused_redis_refuses_calls_within_seconds_and_recovers_by_itself(tmp_path: Path, era: str) -> None:
    db, redis_port, backend_port, port = tmp_path / "backend.db", free_port(), free_port(), free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with redis_process(tmp_path / "redis", redis_port) as server:
        store = f"redis://127.0.0.1:{redis_port}/0"
        async with (
            http_backend(PROFILE, db, backend_port, *PROFILE.seed_demo),
            serve(gateway_toml(tmp_path, store, backend_port), port),
            http_client(era, url) as client,
        ):
            args = {"planId": (await preview(client, PROFILE))["planId"], "idempotencyKey": new_key()}
            os.kill(server.pid, signal.SIGSTOP)  # stopped, its connections still open
            try:
                with anyio.fail_after(30):  # generous for a busy machine; main hangs until SIGCONT
                    refused = await client.call_tool(PROFILE.write_tool, args)
                assert error_code(refused) == "store_unavailable"
                assert PROFILE.write_count(db) == 0
            finally:
                os.kill(server.pid, signal.SIGCONT)
            result = await until_answered(lambda: client.call_tool(PROFILE.write_tool, args))
            assert result.structured_content is not None and result.structured_content["replayed"] is False
    assert PROFILE.write_count(db) == 1


async def until_answered(call: Callable[[], Awaitable[types.CallToolResult]]) -> types.CallToolResult:
    """Call until the answer is something other than store_unavailable (the store is back)."""
    with anyio.fail_after(60):
        while True:
            result = await call()
            if error_code_or_none(result) != "store_unavailable":
                return result
            await anyio.sleep(0.2)


def error_code_or_none(result: types.CallToolResult) -> str | None:
    return error_code(result) if result.is_error else None


async def test_a_claim_no_replica_acknowledged_is_refused_and_a_failover_mid_write_never_writes_a_key_twice(
    tmp_path: Path, era: str
) -> None:
    db, backend_port, port = tmp_path / "backend.db", free_port(), free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with sentinel_group(tmp_path / "redis") as group:
        store = group.url(lock_lease="16")
        async with (
            http_backend(PROFILE, db, backend_port, *PROFILE.seed_demo, "--fault", "latency=3000"),
            serve(gateway_toml(tmp_path, store, backend_port, call_timeout_seconds=5), port),
            http_client(era, url) as client,
        ):
            # The replica stopped: no acknowledgement within replica_wait, so the claim is taken back, nothing sent.
            args = {"planId": (await preview(client, PROFILE))["planId"], "idempotencyKey": new_key()}
            group.replica.send_signal(signal.SIGSTOP)
            try:
                assert error_code(await client.call_tool(PROFILE.write_tool, args)) == "store_unavailable"
            finally:
                group.replica.send_signal(signal.SIGCONT)
            assert PROFILE.write_count(db) == 0
            replica = redis.Redis(port=group.replica_port, decode_responses=True)
            record = f"gateway:key:local:{args['idempotencyKey']}"
            await until(lambda: replica.hget(record, "state") is None)  # released, on the replica too

            # The primary killed while the backend writes: the claim was acknowledged by the replica, which takes
            # over; the key must never be sent again, whatever its retries hear.
            results: list[types.CallToolResult] = []

            async def write() -> None:
                async with http_client(era, url) as writer:
                    results.append(await writer.call_tool(PROFILE.write_tool, args))

            async with anyio.create_task_group() as tasks:
                tasks.start_soon(write)
                await until(lambda: replica.hget(record, "state") == "in_flight")
                group.primary.kill()
            assert PROFILE.write_count(db) == 1
            await until(lambda: _promoted(group.sentinel_ports[0], group.replica_port))
            heard: set[str] = set()
            with anyio.fail_after(90):
                # The settle reached the promoted replica (a replay), or it was lost with the old primary: then
                # request_in_progress until the dead write's lease lapses, and outcome_unknown after. Never again.
                while not heard & {"replayed", "outcome_unknown"}:
                    retry = await client.call_tool(PROFILE.write_tool, args)
                    heard.add(error_code_or_none(retry) or "replayed")
                    await anyio.sleep(0.5)
            assert heard <= {"request_in_progress", "outcome_unknown", "store_unavailable", "replayed"}
            assert len(results) == 1 and not results[0].is_error  # the caller heard the write it made
            replica.close()
    assert PROFILE.write_count(db) == 1


def _promoted(sentinel_port: int, replica_port: int) -> bool:
    try:
        with redis.Redis(port=sentinel_port, decode_responses=True, socket_timeout=1) as sentinel:
            address = sentinel.execute_command("SENTINEL", "get-master-addr-by-name", "mymaster")
    except redis.RedisError:
        return False
    return address is not None and int(address[1]) == replica_port


@pytest.mark.parametrize(
    ("store", "tool_timeout", "named"),
    [
        ("redis://127.0.0.1:1/0?lock_lease=30", None, "backend.call_timeout_seconds"),
        ("redis://127.0.0.1:1/0?lock_lease=50", 45.0, "tools.reset_tenant.call.timeout_seconds"),
    ],
)
async def test_a_lock_lease_not_above_the_longest_write_timeout_is_refused_at_check_and_serve(
    tmp_path: Path, store: str, tool_timeout: float | None, named: str
) -> None:
    data = config_data(PROFILE, tmp_path / "backend.db", store=store, state_dir=tmp_path / "state")
    data["backend"]["call_timeout_seconds"] = 25
    if tool_timeout is not None:
        data["tools"]["reset_tenant"]["call"]["timeout_seconds"] = tool_timeout
    config = write_toml(data, tmp_path / "gateway.toml")
    for command in (["check"], ["serve", "--port", str(free_port())]):
        with anyio.fail_after(60):
            done = await anyio.run_process(
                [PYTHON, "-m", "gateway", *command, "--config", str(config)], check=False, stdin=subprocess.DEVNULL
            )
        assert done.returncode == 2
        assert named in done.stderr.decode() and "lock_lease" in done.stderr.decode()  # the keys are named
