"""The lean path (gateway/http/lean.py) answers a 2026-07-28 call of a reading tool byte for byte as the SDK would.

One gateway over a real legacy backend process, served on a real port; each request of the corpus is sent twice,
once with the lean path on and once with it off (everything to the SDK), and the two answers must be the same:
status, headers (but the date) and body (but the ids and times a preview mints). Each case also says which path
must have answered it, so a lean path that quietly handed everything to the SDK would fail here too.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp.server import _streamable_http_modern as modern
from starlette.types import Receive, Scope, Send

from gateway.config import GatewayConfig, load_config
from gateway.http.app import build_app
from gateway.http.lean import LeanCalls
from gateway.runtime import open_gateway
from tests.support.asgi import serve_asgi
from tests.support.clients import ENVELOPE
from tests.support.configs import config_data, write_toml
from tests.support.processes import free_port
from tests.support.profiles import TENANTS

pytestmark = pytest.mark.anyio

HEADERS = {
    "content-type": "application/json",
    "accept": "application/json, text/event-stream",
    "mcp-protocol-version": "2026-07-28",
    "mcp-method": "tools/call",
}
MINTED = re.compile(r'(\\?"(?:planId|expiresAt|planExpiresAt)\\?":\s*\\?")[^"\\]+')
"""What a preview mints afresh each time (a plan id, its expiry), in the JSON and in the JSON inside its text."""


@dataclass
class Case:
    label: str
    lean: bool
    """Whether the lean path answers it (else the SDK does)."""
    body: Any = None
    arguments: dict[str, Any] | None = field(default_factory=dict)
    tool: str = TENANTS.list_tool
    headers: dict[str, str | None] = field(default_factory=dict)
    """Changes to HEADERS (None removes one)."""
    params: dict[str, Any] = field(default_factory=dict)
    """Added to the call's params."""
    method: str = "POST"
    raw: bytes | None = None

    def request(self) -> tuple[dict[str, str], bytes]:
        headers = {**HEADERS, "mcp-name": self.tool, **self.headers}
        sent = {name: value for name, value in headers.items() if value is not None}
        if self.raw is not None:
            return sent, self.raw
        body = self.body
        if body is None:
            params: dict[str, Any] = {"name": self.tool, "_meta": ENVELOPE, **self.params}
            if self.arguments is not None:
                params["arguments"] = self.arguments
            body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}
        return sent, json.dumps(body).encode()


PREVIEW = {TENANTS.target_arg: TENANTS.main, TENANTS.choice_arg: TENANTS.choices[0]}

READS: list[tuple[str, str, dict[str, Any] | None]] = [
    # A reading tool's call, whatever its arguments: (label, tool, arguments). Both lean paths answer these.
    ("a first page", TENANTS.list_tool, {}),
    ("a page of two", TENANTS.list_tool, {"limit": 2}),
    ("a cursor that was never given", TENANTS.list_tool, {"cursor": "not-a-cursor"}),
    ("a limit past the maximum", TENANTS.list_tool, {"limit": 1000}),
    ("an argument the tool does not take", TENANTS.list_tool, {"colour": "red"}),
    ("no arguments at all", TENANTS.list_tool, None),
    ("a preview", TENANTS.preview_tool, PREVIEW),
    ("a preview of a protected tenant", TENANTS.preview_tool, {**PREVIEW, TENANTS.target_arg: TENANTS.protected}),
    ("a preview of a tenant that does not exist", TENANTS.preview_tool, {**PREVIEW, TENANTS.target_arg: "tn_nobody"}),
    ("a preview of a fixture that does not exist", TENANTS.preview_tool, {**PREVIEW, TENANTS.choice_arg: "no-such"}),
    ("arguments past the size caps", TENANTS.list_tool, {"cursor": "x" * 70_000}),
    ("a tool no one has", "no_such_tool", {}),
]

CORPUS = [
    # Answered on the lean path.
    *(Case(label, lean=True, tool=tool, arguments=arguments) for label, tool, arguments in READS),
    Case(
        "a string id",
        lean=True,
        body={
            "jsonrpc": "2.0",
            "id": "req-1",
            "method": "tools/call",
            "params": {"name": TENANTS.list_tool, "arguments": {}, "_meta": ENVELOPE},
        },
    ),
    Case("a progress token", lean=True, params={"_meta": {**ENVELOPE, "progressToken": "p1"}}),
    Case("an extra header of the client's own", lean=True, headers={"x-trace": "abc"}),
    Case("an Mcp-Param header no argument declares", lean=True, headers={"mcp-param-limit": "2"}),
    # Answered by the SDK: everything else, and anything a check refuses.
    Case("a write tool", lean=False, tool=TENANTS.write_tool, arguments={"planId": "p", "idempotencyKey": "k" * 16}),
    Case("a requestState", lean=False, params={"requestState": "forged"}),
    Case("inputResponses", lean=False, params={"inputResponses": {"a": {"action": "accept"}}}),
    Case("a task", lean=False, params={"task": {"ttl": 60000}}),
    Case(
        "no envelope",
        lean=False,
        body={
            "jsonrpc": "2.0",
            "id": 7,
            "method": "tools/call",
            "params": {"name": TENANTS.list_tool, "arguments": {}},
        },
    ),
    Case("a name header that disagrees", lean=False, headers={"mcp-name": TENANTS.preview_tool}),
    Case("a method header that disagrees", lean=False, headers={"mcp-method": "tools/list"}),
    Case("no method header", lean=False, headers={"mcp-method": None}),
    Case("another content type", lean=False, headers={"content-type": "text/plain"}),
    Case("JSON answers only", lean=False, headers={"accept": "application/json"}),
    Case("a notification", lean=False, body={"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {}}),
    Case("a batch", lean=False, body=[{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {}}]),
    Case("not JSON", lean=False, raw=b"{not json"),
    Case(
        "a boolean id",
        lean=False,
        body={
            "jsonrpc": "2.0",
            "id": True,
            "method": "tools/call",
            "params": {"name": TENANTS.list_tool, "_meta": ENVELOPE},
        },
    ),
    Case(
        "a name that is not a string",
        lean=False,
        body={"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": 5, "_meta": ENVELOPE}},
    ),
    Case("arguments that are not an object", lean=False, arguments=["a"]),  # type: ignore[arg-type]
    Case(
        "tools/list",
        lean=False,
        body={"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {"_meta": ENVELOPE}},
        headers={"mcp-method": "tools/list"},
    ),
    Case("another protocol version", lean=False, headers={"mcp-protocol-version": "2099-01-01"}),
    Case("the 2025 era without a session", lean=False, headers={"mcp-protocol-version": "2025-11-25"}),
    Case("a body past the limit", lean=False, raw=b" " * 1_100_000),
    Case("a GET", lean=False, method="GET"),
]


async def test_each_request_is_answered_as_the_sdk_answers_it(tmp_path: Path) -> None:
    async with lean_gateway(tmp_path) as (url, lean, sdk_answers), httpx.AsyncClient(timeout=30) as http:
        for case in CORPUS:
            headers, body = case.request()
            before = sdk_answers()
            on = await http.request(case.method, url, headers=headers, content=body)
            took_lean = sdk_answers() == before
            predicate, lean.lean = lean.lean, lambda name: False
            try:
                off = await http.request(case.method, url, headers=headers, content=body)
            finally:
                lean.lean = predicate
            assert seen(on) == seen(off), case.label
            assert took_lean == case.lean, case.label
            assert on.status_code < 500, case.label


async def test_a_read_slower_than_the_deferral_window_answers_on_an_event_stream_as_the_sdk_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the SDK's window (15 s; a millisecond here) the answer becomes an event stream: pings, then the
    result as its one event. Both paths give the same stream, and the same result in it."""
    monkeypatch.setattr(modern, "_SSE_PING_INTERVAL", 0.001)
    async with lean_gateway(tmp_path) as (url, lean, sdk_answers):
        headers, body = Case("slow", lean=True).request()
        async with httpx.AsyncClient(timeout=30) as http:
            before = sdk_answers()
            on = await http.post(url, headers=headers, content=body)
            assert sdk_answers() == before
            lean.lean = lambda name: False
            off = await http.post(url, headers=headers, content=body)
    for answer in (on, off):
        assert answer.status_code == 200
        assert answer.headers["content-type"] == "text/event-stream"
        assert answer.text.startswith(": ping\r\n\r\n")
    assert events(on) == events(off)
    assert events(on)[0]["result"]["structuredContent"]["tenants"]


async def test_a_hidden_tool_takes_the_path_an_unknown_one_takes(tmp_path: Path) -> None:
    """A caller without the write scope: the write tool is hidden from it, so its call answers as an unknown
    tool's, on the same path (a path of its own would tell the two apart by their timing)."""
    reader: dict[str, str | None] = {"authorization": "Bearer lean-reader"}
    unknown = Case("a tool no one has", lean=True, tool="no_such_tool", headers=reader)
    visible = Case("a reading tool", lean=True, headers=reader)
    async with lean_gateway(tmp_path, auth=True) as (url, lean, sdk_answers), httpx.AsyncClient(timeout=30) as http:
        headers, body = Case(
            "a preview", lean=True, tool=TENANTS.preview_tool, arguments=PREVIEW, headers=reader
        ).request()
        plan = json.loads((await http.post(url, headers=headers, content=body)).text)["result"]["structuredContent"]
        writes = TENANTS.write_count(tmp_path / "backend.db")
        hidden = Case(
            "a hidden write tool, with a real plan",
            lean=True,
            tool=TENANTS.write_tool,
            headers=reader,
            arguments={"planId": plan["planId"], "idempotencyKey": "k" * 16},
        )
        for case in (hidden, unknown, visible):
            headers, body = case.request()
            before = sdk_answers()
            on = await http.post(url, headers=headers, content=body)
            assert sdk_answers() == before, case.label
            predicate, lean.lean = lean.lean, lambda name: False
            try:
                off = await http.post(url, headers=headers, content=body)
            finally:
                lean.lean = predicate
            assert seen(on) == seen(off), case.label
    assert json.loads(on.text)["result"]["structuredContent"]["tenants"]
    assert TENANTS.write_count(tmp_path / "backend.db") == writes  # the hidden write reached no backend


def lean_config(tmp_path: Path, *, auth: bool, port: int) -> GatewayConfig:
    """The TENANTS config over a real backend process; with ``auth``, one static token that may only read."""
    data = config_data(TENANTS, tmp_path / "backend.db", *TENANTS.seed_demo, state_dir=tmp_path / "state")
    data["gateway"]["store"] = f"sqlite:{tmp_path}/gateway.db"
    if auth:
        digest = hashlib.sha256(b"lean-reader").hexdigest()
        data["auth"] = {
            "verifier": "static",
            "resource_url": f"http://127.0.0.1:{port}/mcp",
            "tokens": [{"sha256": digest, "client_id": "lean-reader", "scopes": ["tenants:read"]}],
        }
    return load_config(write_toml(data, tmp_path / "gateway.toml"))


@asynccontextmanager
async def lean_gateway(
    tmp_path: Path, *, auth: bool = False
) -> AsyncIterator[tuple[str, LeanCalls, Callable[[], int]]]:
    """A gateway over a real backend process, served on a port: its /mcp URL, its lean path, and how many
    requests the SDK has answered so far."""
    port = free_port()
    config = lean_config(tmp_path, auth=auth, port=port)
    async with open_gateway(config) as gw:
        app = build_app(gw)
        lean = lean_path_of(app.endpoint)
        answered = [0]
        sdk = lean.sdk

        async def counted(scope: Scope, receive: Receive, send: Send) -> None:
            answered[0] += 1
            await sdk(scope, receive, send)

        lean.sdk = counted
        async with serve_asgi(app, port, lifespan="on"):
            yield f"http://127.0.0.1:{port}/mcp", lean, lambda: answered[0]


def lean_path_of(endpoint: Any) -> LeanCalls:
    """The lean path inside /mcp's endpoint (behind the token checks, when there are any)."""
    while not isinstance(endpoint, LeanCalls):
        endpoint = endpoint.app
    return endpoint


def seen(response: httpx.Response) -> tuple[int, list[tuple[str, str]], str]:
    """What a client sees of an answer, but the date and what is minted afresh (a plan, a session)."""
    minted = {"mcp-session-id": "(minted)"}
    headers = [(name, minted.get(name, value)) for name, value in response.headers.items() if name != "date"]
    return response.status_code, headers, MINTED.sub(r"\1(minted)", response.text)


def events(response: httpx.Response) -> list[dict[str, Any]]:
    return [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")]
