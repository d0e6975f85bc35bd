"""The tasks extension's methods and listen streams over real HTTP, against ``serve``: a ``tasks/get`` whose
``Mcp-Name`` routing header names another task is refused (-32020) before anything is looked up; and a 2026-era
client's ``subscriptions/listen`` stream does not hold the gateway up: on SIGTERM the stream is ended gracefully
(its result sent, not dropped) and ``serve`` exits within seconds."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client

from tests.support.configs import config_data, write_toml
from tests.support.processes import free_port, serve
from tests.support.profiles import TENANTS

pytestmark = pytest.mark.anyio


async def test_sigterm_ends_open_listen_streams_gracefully_and_serve_exits(tmp_path: Path) -> None:
    data = config_data(TENANTS, tmp_path / "backend.db", *TENANTS.seed_demo, state_dir=tmp_path / "state")
    port = free_port()
    async with (
        serve(write_toml(data, tmp_path / "gateway.toml"), port) as gateway,
        Client(f"http://127.0.0.1:{port}/mcp") as client,
    ):
        async with client.listen(tools_list_changed=True) as first, client.listen(tools_list_changed=True) as second:
            os.kill(gateway.pid, signal.SIGTERM)
            with anyio.fail_after(10):
                events = [event async for event in first] + [event async for event in second]
        with anyio.fail_after(10):
            while gateway.poll() is None:  # noqa: ASYNC110 - a child process, polled
                await anyio.sleep(0.05)
    assert events == []  # a graceful end: the loop stops, no SubscriptionLost
    assert gateway.returncode == 0


async def test_a_task_method_whose_routing_header_names_another_task_is_refused(tmp_path: Path) -> None:
    data = config_data(TENANTS, tmp_path / "backend.db", *TENANTS.seed_demo, state_dir=tmp_path / "state")
    port = free_port()
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}},
    }

    async def task_get(name: str) -> dict[str, Any]:
        headers = {
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2026-07-28",
            "Mcp-Method": "tasks/get",
            "Mcp-Name": name,
        }
        body = {"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"taskId": "tk_mine", "_meta": meta}}
        async with httpx.AsyncClient(timeout=30) as http:
            answer = await http.post(f"http://127.0.0.1:{port}/mcp", json=body, headers=headers)
        return dict(answer.json()["error"])

    async with serve(write_toml(data, tmp_path / "gateway.toml"), port):
        mismatched = await task_get("tk_someone_elses")
        matching = await task_get("tk_mine")
    assert mismatched["code"] == -32020 and "Mcp-Name" in mismatched["message"]
    assert matching["code"] == -32602  # routed right, and no such task
