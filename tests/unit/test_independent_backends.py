"""Backends are independent: a third backend that answers ``initialize`` and pings but never ``tools/list`` (the
hostile server in this process) costs the other two nothing. Their tools are listed and answer while its listing
hangs (even for the very first call), its own tool fails with ``backend_unavailable`` naming it once its list
timeout passes, and ``/readyz`` names it as the one that is down."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client

from gateway.backend import BackendUnavailable
from gateway.backend.client import McpBackend
from gateway.config import BackendSection, parse_config
from gateway.http.app import build_app
from gateway.runtime import Gateway, open_gateway
from tests.hostile_backend.__main__ import Log, build
from tests.support.clients import connect, error_body
from tests.support.configs import together_data
from tests.support.inprocess import opener_for
from tests.support.profiles import FLAGS, TENANTS

pytestmark = pytest.mark.anyio

HEALTHY_SECONDS = 5.0
"""How long a healthy backend's call may take here, loaded machine included."""
LIST_WAIT = 0.5
"""How long a listing waits here for a backend being loaded (the gateway's is 3 s): far less than the hung
listing's 60 s timeout, as the shipped one is, without waiting 3 s of real time."""
READ_ONLY = {"read_only": True, "destructive": False, "idempotent": True, "open_world": False}


def hung_opener(log: Path) -> Any:
    server = build(Log(log), hang_list=True)

    def open_client() -> AbstractAsyncContextManager[Client]:
        return Client(server, mode="legacy")

    return open_client


@pytest.fixture(params=[0.1])
async def three(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[Gateway]:
    """Tenants and flags in this process, and a third backend whose tools/list never answers (cut at the list
    timeout the test asks for)."""
    data = together_data(TENANTS, tmp_path / "tenants.db", *TENANTS.seed_demo, state_dir=tmp_path / "state")
    data["backends"]["hung"] = {"command": "unused", "list_timeout_seconds": request.param}
    data["tools"]["read_note"] = {"kind": "passthrough", "backend": "hung", "annotations": READ_ONLY}
    config = parse_config(data)
    openers = {name: opener_for(config.backend_sections()[name]) for name in ("tenants", "flags")}
    openers["hung"] = hung_opener(tmp_path / "heard.jsonl")
    async with open_gateway(config, openers=openers, list_wait=LIST_WAIT) as gw:
        yield gw


@pytest.mark.parametrize("three", [60.0], indirect=True)
async def test_a_backend_whose_tools_list_hangs_stalls_no_other_backend(three: Gateway) -> None:
    # The client lists the tools first: that listing gives the hung backend the gateway's list wait, once, not 60.
    async with connect(three, "2025-11-25") as client:
        with anyio.fail_after(HEALTHY_SECONDS):  # far less than the hung listing's timeout, first call included
            page = await client.call_tool(TENANTS.list_tool, {})
            flags = await client.call_tool(FLAGS.list_tool, {})
    assert not page.is_error and not flags.is_error, (page.content, flags.content)


async def test_the_hung_backends_tool_fails_alone_naming_it_once_its_list_timeout_passes(
    three: Gateway, era: str
) -> None:
    async with connect(three, era) as client:
        with anyio.fail_after(HEALTHY_SECONDS * 2):
            note = await client.call_tool("read_note", {"id": "n1"})
            listed = {tool.name for tool in (await client.list_tools()).tools}
    refusal = error_body(note)
    assert refusal["code"] == "backend_unavailable" and refusal["details"] == {"backend": "hung"}
    assert "hung" in refusal["message"]
    assert TENANTS.list_tool in listed and FLAGS.list_tool in listed and "read_note" not in listed


async def test_readiness_names_the_backend_whose_tools_list_hangs(three: Gateway) -> None:
    transport = httpx.ASGITransport(app=build_app(three))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8080") as http:
        with anyio.fail_after(HEALTHY_SECONDS * 2):
            ready = (await http.get("/readyz")).json()
    assert ready["backends"] == {"tenants": "up", "flags": "up", "hung": "down"}


async def test_a_hung_tools_list_is_cut_at_the_backends_list_timeout(tmp_path: Path) -> None:
    section = BackendSection(command="unused", list_timeout_seconds=0.1)
    async with McpBackend(section, opener=hung_opener(tmp_path / "heard.jsonl")) as backend:
        with anyio.fail_after(10), pytest.raises(BackendUnavailable):
            await backend.list_tools()
        assert await backend.probe()  # it still answers pings: only its listing is stuck
