"""Three backends behind one served gateway: one answers, one hangs every tools/list, one is killed mid-run and
restarted. Nothing hangs past its backend's timeouts: the healthy backend's reads answer throughout, the sick
backends' tools answer backend_unavailable naming their backend, and the killed one's tools come back without a
restart of the gateway. (Their latency is measured by bench/independence.py, not here.)"""

from __future__ import annotations

from collections.abc import Awaitable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import pytest
from mcp import Client

from gateway.backend.client import PROBE_SECONDS
from tests.support.clients import error_body, until_reachable
from tests.support.configs import SICK_TIMEOUTS, three_backends_data, write_toml
from tests.support.processes import ROOT, Proc, backend_args, free_port, hostile_args, http_backend, process, serve
from tests.support.profiles import FLAGS, TENANTS

pytestmark = pytest.mark.anyio

T = TypeVar("T")
SICK_BOUND = sum(SICK_TIMEOUTS.values()) + PROBE_SECONDS + 2
"""The longest any call may take while a backend is sick: its connect, list and call timeouts, a ping, a margin."""
HEALTHY_BOUND = 5.0


async def within(seconds: float, call: Awaitable[T]) -> T:
    with anyio.fail_after(seconds):
        return await call


def refused_by(result: Any) -> str:
    body = error_body(result)
    assert body["code"] == "backend_unavailable", body
    return str(body["details"]["backend"])


async def test_a_hung_and_a_killed_backend_cost_the_healthy_one_nothing(tmp_path: Path) -> None:
    ports = {"tenants": free_port(), "flags": free_port(), "notes": free_port()}
    port, flags_db = free_port(), tmp_path / f"{FLAGS.name}.db"
    data = three_backends_data(tmp_path / "tenants.db", ports, state_dir=tmp_path / "state")
    config = write_toml(data, tmp_path / "gateway.toml")
    flags = Proc(backend_args(FLAGS, flags_db, *FLAGS.seed_demo, port=ports["flags"]), ports["flags"], tmp_path / "f")
    hung = hostile_args(ports["notes"], tmp_path / "heard.jsonl", "--hang-list")
    await anyio.to_thread.run_sync(flags.start)
    try:
        async with (
            http_backend(TENANTS, tmp_path / "tenants.db", ports["tenants"], *TENANTS.seed_demo),
            process(hung, ports["notes"], cwd=ROOT),
            serve(config, port),
            Client(f"http://127.0.0.1:{port}/mcp") as client,
        ):
            page = await within(HEALTHY_BOUND + SICK_BOUND, client.call_tool(TENANTS.list_tool, {}))  # first call
            assert not page.is_error, page.content
            assert refused_by(await within(SICK_BOUND, client.call_tool("read_note", {"id": "n1"}))) == "notes"
            assert not (await within(HEALTHY_BOUND, client.call_tool(FLAGS.list_tool, {}))).is_error
            listed = {tool.name for tool in (await within(SICK_BOUND, client.list_tools())).tools}
            assert TENANTS.list_tool in listed and FLAGS.list_tool in listed and "read_note" not in listed
            await anyio.to_thread.run_sync(flags.kill)
            for _ in range(3):  # before and after the gateway notices
                assert not (await within(HEALTHY_BOUND, client.call_tool(TENANTS.list_tool, {}))).is_error
                assert refused_by(await within(SICK_BOUND, client.call_tool(FLAGS.list_tool, {}))) == "flags"
                await anyio.sleep(PROBE_SECONDS)
            listed = {tool.name for tool in (await within(SICK_BOUND, client.list_tools())).tools}
            assert FLAGS.list_tool not in listed and TENANTS.list_tool in listed
            await anyio.to_thread.run_sync(flags.start)
            back = await until_reachable(lambda: within(SICK_BOUND, client.call_tool(FLAGS.list_tool, {})))
            assert not back.is_error, back.content
    finally:
        flags.stop()
