"""The front door (gateway/http/front.py): an MCP request skips the Starlette app's stack, and is answered exactly as
the app alone answers it, refusals of the edge and a failing endpoint included; every other request is the app's."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from gateway.config import parse_config
from gateway.http.app import build_app
from gateway.http.front import FrontDoor
from gateway.http.proxies import TrustedProxies
from tests.support.clients import ENVELOPE, INITIALIZE, POST_HEADERS, Clock, running_gateway
from tests.support.configs import config_data
from tests.support.profiles import TENANTS

pytestmark = pytest.mark.anyio
BASE = "http://127.0.0.1:8080"
STATELESS = {**POST_HEADERS, "MCP-Protocol-Version": "2026-07-28"}
READ = {
    "jsonrpc": "2.0",
    "id": 3,
    "method": "tools/call",
    "params": {"name": TENANTS.list_tool, "arguments": {}, "_meta": ENVELOPE},
}

LIST = {"jsonrpc": "2.0", "id": 4, "method": "tools/list", "params": {"_meta": ENVELOPE}}
REQUESTS: list[tuple[str, str, dict[str, str], Any]] = [
    ("read, 2026-07-28", "POST", {**STATELESS, "Mcp-Method": "tools/call", "Mcp-Name": TENANTS.list_tool}, READ),
    ("tools/list, 2026-07-28", "POST", {**STATELESS, "Mcp-Method": "tools/list"}, LIST),
    ("initialize, 2025-11-25", "POST", POST_HEADERS, INITIALIZE),
    ("relayed by a proxy", "POST", {**POST_HEADERS, "X-Forwarded-For": "203.0.113.9"}, INITIALIZE),
    ("a foreign Host", "POST", {**POST_HEADERS, "Host": "evil.example"}, INITIALIZE),
    ("a foreign Origin", "POST", {**POST_HEADERS, "Origin": "http://evil.example"}, INITIALIZE),
    ("GET without a session", "GET", {"Accept": "text/event-stream"}, None),
    ("not JSON", "POST", STATELESS, "{"),
]


@pytest.fixture
async def front(tmp_path: Path) -> AsyncIterator[FrontDoor]:
    """The app ``serve`` runs, its lifespan entered (the SDK's session manager runs in it)."""
    data = config_data(TENANTS, tmp_path / "backend.db", *TENANTS.seed_demo, state_dir=tmp_path / "state")
    async with running_gateway(parse_config(data), Clock(), backend_in_process=True) as gw:
        app = build_app(gw)
        async with app.app.router.lifespan_context(app.app):
            yield app


async def answered(app: Any, method: str, path: str, headers: dict[str, str], body: Any) -> tuple[Any, ...]:
    """What a client sees of one answer, but the session id a 2025 initialize mints afresh."""
    content = None if body is None else body if isinstance(body, str) else json.dumps(body)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as http:
        response = await http.request(method, path, headers=headers, content=content)
    kept = sorted((name, value) for name, value in response.headers.items() if name != "mcp-session-id")
    return response.status_code, kept, response.text, "mcp-session-id" in response.headers


@pytest.mark.parametrize(("label", "method", "headers", "body"), REQUESTS, ids=[each[0] for each in REQUESTS])
async def test_an_mcp_request_is_answered_as_the_app_alone_answers_it(
    front: FrontDoor, label: str, method: str, headers: dict[str, str], body: Any
) -> None:
    through_front = await answered(front, method, "/mcp", headers, body)
    through_app = await answered(front.app, method, "/mcp", headers, body)
    assert through_front == through_app
    if label.endswith("2026-07-28"):
        assert through_front[0] == 200 and '"result"' in through_front[2]
    if label in ("relayed by a proxy", "a foreign Host", "a foreign Origin"):
        assert through_front[0] in (403, 421)  # the edge refused it on the front door's path too


async def test_only_an_mcp_request_skips_the_apps_stack(front: FrontDoor) -> None:
    seen: list[str] = []
    app = front.app

    async def counted(scope: Scope, receive: Receive, send: Send) -> None:
        seen.append(scope["path"])
        await app(scope, receive, send)

    front.app = counted  # type: ignore[assignment]
    read = {**STATELESS, "Mcp-Method": "tools/call", "Mcp-Name": TENANTS.list_tool}
    assert (await answered(front, "POST", "/mcp", read, READ))[0] == 200
    assert (await answered(front, "GET", "/healthz", {}, None))[0] == 200
    assert (await answered(front, "POST", "/mcp/", read, READ))[0] == 307  # the app's redirect, as before
    assert seen == ["/healthz", "/mcp/"]


async def test_an_endpoint_that_fails_before_answering_gets_the_apps_plain_500() -> None:
    async def failing(scope: Scope, receive: Receive, send: Send) -> None:
        raise RuntimeError("secret detail")

    async def elsewhere(request: Any) -> PlainTextResponse:
        return PlainTextResponse("elsewhere")

    loopback = TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=["127.0.0.1:*"], allowed_origins=["http://127.0.0.1:*"]
    )
    edge: dict[str, Any] = {"settings": loopback, "refuse_relayed": True, "proxies": TrustedProxies([])}
    front = FrontDoor(Starlette(routes=[Route("/other", elsewhere)]), failing, edge)
    transport = httpx.ASGITransport(app=front, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url=BASE) as http:
        failed = await http.post("/mcp", headers=POST_HEADERS, content=json.dumps(INITIALIZE))
        refused = await http.post("/mcp", headers={**POST_HEADERS, "X-Forwarded-For": "203.0.113.9"}, content="{}")
    assert (failed.status_code, failed.text) == (500, "Internal Server Error")
    assert "secret" not in failed.text
    assert refused.status_code == 403  # the edge answers before the endpoint could fail
