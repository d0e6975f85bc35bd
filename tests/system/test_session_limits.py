"""One caller cannot exhaust the 2025 session table of a real ``serve`` process: a per-caller quota, ``initialize``
taken from the caller's rate-limit bucket, and a short idle timeout for sessions that never called a tool."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.support.clients import INITIALIZE, INITIALIZED, POST_HEADERS, Answers, new_key, preview
from tests.support.configs import config_data, write_toml
from tests.support.processes import free_port, serve
from tests.support.profiles import TENANTS

pytestmark = pytest.mark.anyio

LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "list_tenants", "arguments": {}}}
FLOOD = 2000
QUOTA = 100  # the default http.max_sessions_per_caller


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass
class Served:
    url: str
    pid: int


@asynccontextmanager
async def gateway(tmp: Path, change: Callable[[dict[str, Any]], None] = lambda data: None) -> AsyncIterator[Served]:
    """A served gateway with static tokens ``greedy`` (read-only) and ``other`` (may reset)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    data = config_data(TENANTS, tmp / "backend.db", *TENANTS.seed_demo, state_dir=tmp / "state")
    data["auth"] = {
        "verifier": "static",
        "resource_url": url,
        "tokens": [
            {"sha256": sha("greedy"), "client_id": "greedy", "scopes": ["tenants:read"]},
            {"sha256": sha("other"), "client_id": "other", "scopes": ["tenants:read", "tenants:reset"]},
        ],
    }
    change(data)
    async with serve(write_toml(data, tmp / "gateway.toml"), port) as child:
        yield Served(url, child.pid)


def bearer(name: str) -> dict[str, str]:
    return {**POST_HEADERS, "Authorization": f"Bearer {name}"}


def resident_kib(pid: int) -> int:
    """The process's resident memory (VmRSS) in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


async def open_session(http: httpx.AsyncClient, url: str, who: str) -> httpx.Response:
    return await http.post(url, json=INITIALIZE, headers=bearer(who))


async def test_a_flood_of_initializes_from_one_caller_leaves_everyone_else_served(tmp_path: Path) -> None:
    async with gateway(tmp_path) as served, httpx.AsyncClient(timeout=60) as http:
        url = served.url
        before = resident_kib(served.pid)
        statuses: list[int] = []
        codes: set[str] = set()

        async def flood(count: int) -> None:
            for _ in range(count):
                answer = await open_session(http, url, "greedy")
                statuses.append(answer.status_code)
                if answer.status_code != 200:
                    codes.add(answer.json()["error"]["data"]["code"])

        with anyio.fail_after(900):
            async with anyio.create_task_group() as tasks:
                for _ in range(20):
                    tasks.start_soon(flood, FLOOD // 20)
        after = resident_kib(served.pid)
        print(f"\nRSS before {before} KiB, after {FLOOD} initializes {after} KiB (+{after - before} KiB)")

        # Everyone else is still served: a whole 2025 flow, prompt included.
        other = httpx2.AsyncClient(headers={"Authorization": "Bearer other"}, timeout=60)
        transport = streamable_http_client(url, http_client=other)
        async with Client(transport, mode="legacy", elicitation_callback=Answers()) as c:
            plan = await preview(c, TENANTS)
            before_writes = TENANTS.write_count(tmp_path / "backend.db")
            done = await c.call_tool(TENANTS.write_tool, {"planId": plan["planId"], "idempotencyKey": new_key()})
    assert statuses.count(200) == QUOTA
    assert set(statuses) == {200, 429}
    assert codes == {"too_many_sessions"}
    assert done.structured_content is not None and done.structured_content["replayed"] is False
    assert TENANTS.write_count(tmp_path / "backend.db") == before_writes + 1
    assert after - before < 64 * 1024  # 2,000 open sessions took about 100 MB before the quota


async def test_initialize_takes_a_token_from_the_callers_bucket(tmp_path: Path) -> None:
    def limited(data: dict[str, Any]) -> None:
        data["rate_limits"] = {"per_caller": {"per_second": 0.001, "burst": 3}}

    async with gateway(tmp_path, limited) as served, httpx.AsyncClient(timeout=60) as http:
        url = served.url
        opened = [await open_session(http, url, "greedy") for _ in range(4)]
        others = await open_session(http, url, "other")
        session = opened[0].headers["mcp-session-id"]
        await http.post(url, json=INITIALIZED, headers={**bearer("greedy"), "Mcp-Session-Id": session})
        listed = await http.post(url, json=LIST, headers={**bearer("greedy"), "Mcp-Session-Id": session})
    assert [answer.status_code for answer in opened] == [200, 200, 200, 429]
    refused = opened[3]
    assert refused.json()["error"]["data"]["code"] == "rate_limited"
    assert float(refused.headers["retry-after"]) > 0
    assert others.status_code == 200
    # The bucket is the one tool calls take from: three initializes emptied it.
    assert '\\"code\\":\\"rate_limited\\"' in listed.text


async def test_a_request_without_a_session_that_is_not_initialize_opens_none_and_takes_no_token(tmp_path: Path) -> None:
    """Only an initialize opens a session: a tool call (or anything else) POSTed without a session id is refused
    with 400 and no session id that would then answer 404, and it costs the caller no token of their bucket."""

    def limited(data: dict[str, Any]) -> None:
        data["rate_limits"] = {"per_caller": {"per_second": 0.001, "burst": 1}}

    async with gateway(tmp_path, limited) as served, httpx.AsyncClient(timeout=60) as http:
        url = served.url
        reset = {**LIST, "params": {"name": TENANTS.write_tool, "arguments": {"planId": "pl_x", "idempotencyKey": "k"}}}
        stray = [await http.post(url, json=message, headers=bearer("other")) for message in (reset, LIST, INITIALIZED)]
        opened = await open_session(http, url, "other")
    for answer in stray:
        assert answer.status_code == 400, answer.text
        assert "mcp-session-id" not in answer.headers
        assert "Missing session ID" in answer.json()["error"]["message"]
    assert opened.status_code == 200, opened.text
    assert TENANTS.write_count(tmp_path / "backend.db") == 0


async def test_a_session_that_never_called_a_tool_expires_soon_and_frees_its_place(tmp_path: Path) -> None:
    def short(data: dict[str, Any]) -> None:
        data["http"] = {**data.get("http", {}), "unused_session_idle_seconds": 1, "max_sessions_per_caller": 2}

    async with gateway(tmp_path, short) as served, httpx.AsyncClient(timeout=60) as http:
        url = served.url
        used = (await open_session(http, url, "greedy")).headers["mcp-session-id"]
        await http.post(url, json=INITIALIZED, headers={**bearer("greedy"), "Mcp-Session-Id": used})
        listed = await http.post(url, json=LIST, headers={**bearer("greedy"), "Mcp-Session-Id": used})
        assert listed.status_code == 200
        unused = (await open_session(http, url, "greedy")).headers["mcp-session-id"]
        await http.post(url, json=INITIALIZED, headers={**bearer("greedy"), "Mcp-Session-Id": unused})
        full = await open_session(http, url, "greedy")
        with anyio.fail_after(60):
            while (third := await open_session(http, url, "greedy")).status_code != 200:
                assert third.status_code == 429
                await anyio.sleep(0.2)
        ping = {"jsonrpc": "2.0", "id": 3, "method": "ping"}
        gone = await http.post(url, json=ping, headers={**bearer("greedy"), "Mcp-Session-Id": unused})
        kept = await http.post(url, json=ping, headers={**bearer("greedy"), "Mcp-Session-Id": used})
    assert full.status_code == 429
    assert gone.status_code == 404
    assert kept.status_code == 200
