"""Readiness tells the truth: a backend that dies reads `down` at the next probe, without any call to it first,
whether it was an HTTP server that was killed or a stdio child that exited and cannot start again (one that can is
started again at that probe); and `up` again once it is back. Its
tools leave tools/list meanwhile, and clients are told (notifications/tools/list_changed) both ways: a 2025-era
session on its own stream, a 2026-era client on the subscriptions/listen stream it opened."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import Subscription

from tests.support.configs import together_data, write_toml
from tests.support.processes import free_port, http_backend, serve
from tests.support.profiles import FLAGS, TENANTS

pytestmark = pytest.mark.anyio


def children(pid: int) -> list[int]:
    """The live child processes of ``pid`` (Linux /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(stat.parent.name))
    return found


async def readiness(base: str) -> tuple[dict[str, Any], str]:
    async with httpx.AsyncClient(timeout=30) as http:
        ready = (await http.get(f"{base}/readyz")).json()
        metrics = (await http.get(f"{base}/metrics")).text
    return ready, metrics


def tenants_over_http(tmp_path: Path, http_db: Path, backend_port: int) -> dict[str, Any]:
    """Both backends: tenants over HTTP on ``backend_port`` (started by the test), flags a stdio child."""
    return together_data(
        TENANTS,
        http_db,
        state_dir=tmp_path / "state",
        store=f"sqlite:{tmp_path}/gateway.db",
        backends={"tenants": {"transport": "http", "url": f"http://127.0.0.1:{backend_port}/mcp"}},
    )


async def test_a_killed_http_backend_and_an_exited_stdio_child_read_down_within_seconds(tmp_path: Path) -> None:
    http_db = tmp_path / "tenants.db"  # the flags backend (stdio) gets flags.db beside it
    backend_port, port = free_port(), free_port()
    data = tenants_over_http(tmp_path, http_db, backend_port)
    config = write_toml(data, tmp_path / "gateway.toml")
    base = f"http://127.0.0.1:{port}"
    async with serve(config, port) as gateway:
        async with http_backend(TENANTS, http_db, backend_port, *TENANTS.seed_demo):
            ready, metrics = await until_ready(base)  # the gateway started first: it retries every probe interval
            assert 'gateway_backend_connected{backend="tenants"} 1.0' in metrics
        # The HTTP backend is gone; nothing has called it since.
        with anyio.fail_after(5):
            ready, metrics = await readiness(base)
        assert ready["backends"]["tenants"] == "down", ready
        assert 'gateway_backend_connected{backend="tenants"} 0.0' in metrics
        assert ready["backends"]["flags"] == "up", ready
        # The stdio child exits (killed from outside): the next probe finds it gone and starts another one (a child
        # that cannot start again reads down: the test below).
        killed = children(gateway.pid)
        for child in killed:
            os.kill(child, signal.SIGKILL)
        await anyio.sleep(0.2)
        with anyio.fail_after(5):
            ready, _ = await readiness(base)
        assert ready["backends"]["flags"] == "up", ready
        assert children(gateway.pid) and not set(children(gateway.pid)) & set(killed)
        # Both come back without a restart of the gateway.
        async with http_backend(TENANTS, http_db, backend_port):
            with anyio.fail_after(60):
                while set(ready["backends"].values()) != {"up"}:
                    await anyio.sleep(0.5)
                    ready, _ = await readiness(base)


RESPAWN_GUARD = (
    "import os, sys; os.path.exists(sys.argv[1]) and sys.exit(3); "
    "os.execv(sys.executable, [sys.executable, *sys.argv[2:]])"
)
"""A stdio backend's command line that will not start again while a file exists (a crash that persists)."""


class Changes:
    """Records the tools/list_changed notifications a 2025-era session hears."""

    def __init__(self) -> None:
        self.count = 0

    async def __call__(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self.count += 1

    async def count_events(self, stream: Subscription) -> None:
        """Count the events of a 2026-era listen stream (every one there is a tools/list_changed)."""
        async for _ in stream:
            self.count += 1

    async def after(self, seen: int) -> None:
        with anyio.fail_after(10):
            while self.count <= seen:  # noqa: ASYNC110 - the notification arrives on the client's own task
                await anyio.sleep(0.05)


async def listed(session: Client) -> set[str]:
    return {tool.name for tool in (await session.list_tools()).tools}


async def test_a_dead_backends_tools_leave_tools_list_with_list_changed_and_come_back(tmp_path: Path) -> None:
    http_db, down_flag = tmp_path / "tenants.db", tmp_path / "flags-may-not-start"
    backend_port, port = free_port(), free_port()
    data = tenants_over_http(tmp_path, http_db, backend_port)
    flags = data["backends"]["flags"]
    flags["args"] = ["-c", RESPAWN_GUARD, str(down_flag), *flags["args"]]
    config = write_toml(data, tmp_path / "gateway.toml")
    base, changes = f"http://127.0.0.1:{port}", Changes()
    tenants_tools = {TENANTS.list_tool, TENANTS.preview_tool, TENANTS.write_tool}
    flags_tools = {FLAGS.list_tool, FLAGS.preview_tool, FLAGS.write_tool, "flag_history", "describe_flag"}
    log = (tmp_path / "gateway.log").open("w")
    heard = Changes()  # by a 2026-era client, on its subscriptions/listen stream
    async with (
        serve(config, port, stderr=log) as gateway,
        Client(streamable_http_client(f"{base}/mcp"), mode="legacy", message_handler=changes) as session,
        Client(f"{base}/mcp") as modern,
        modern.listen(tools_list_changed=True) as stream,
        anyio.create_task_group() as listening,
    ):
        listening.start_soon(heard.count_events, stream)
        async with http_backend(TENANTS, http_db, backend_port, *TENANTS.seed_demo):
            await until_listed(session, tenants_tools | flags_tools)
            seen, heard_seen = changes.count, heard.count
        # The HTTP backend is killed: readiness says so within 5 s, its tools leave, and the session hears it.
        with anyio.fail_after(5):
            ready, _ = await readiness(base)
        assert ready["backends"] == {"tenants": "down", "flags": "up"}, ready
        await changes.after(seen)
        await heard.after(heard_seen)
        assert await listed(session) == flags_tools
        assert {tool.name for tool in (await modern.list_tools()).tools} == flags_tools
        # The stdio child is killed and cannot start again.
        down_flag.touch()
        seen = changes.count
        for child in children(gateway.pid):
            os.kill(child, signal.SIGKILL)
        with anyio.fail_after(5):
            while (await readiness(base))[0]["backends"]["flags"] != "down":  # noqa: ASYNC110 - polled over HTTP
                await anyio.sleep(0.2)
        await changes.after(seen)
        assert await listed(session) == set()
        # Both come back without a restart of the gateway, and the session hears that too.
        down_flag.unlink()
        seen = changes.count
        async with http_backend(TENANTS, http_db, backend_port):
            await until_listed(session, tenants_tools | flags_tools)
            ready, _ = await readiness(base)
        assert changes.count > seen
        assert set(ready["backends"].values()) == {"up"}, ready
        listening.cancel_scope.cancel()
    assert stream.honored.tools_list_changed is True


async def until_ready(base: str) -> tuple[dict[str, Any], str]:
    with anyio.fail_after(30):
        while True:
            ready, metrics = await readiness(base)
            if set(ready["backends"].values()) == {"up"}:
                return ready, metrics
            await anyio.sleep(0.2)


async def until_listed(session: Client, tools: set[str]) -> None:
    with anyio.fail_after(60):
        while await listed(session) != tools:  # noqa: ASYNC110 - polled over HTTP
            await anyio.sleep(0.5)
