"""The lean path of 2025 sessions (gateway/http/session_reads.py) answers a read byte for byte as the SDK would.

One gateway over a real legacy backend process, served on a real port, and two sessions opened on it per protocol
version; each request of the corpus is sent to each, to one with the lean path on and to the other with it off
(everything to the SDK's session machinery), and the two answers must be the same: status, headers (but the date)
and body (but the ids and times a preview mints). Each case also says which path must have answered it, so a lean
path that quietly handed everything to the SDK would fail here too. A client's cancel and a session's end, which
reach a call in flight on either path, are compared the same way.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp_types as types
import pytest
from mcp.server import ServerRequestContext

from gateway.http.app import build_app
from gateway.http.session_reads import SessionReads
from gateway.runtime import open_gateway
from tests.support.asgi import serve_asgi
from tests.support.clients import ENVELOPE, INITIALIZED, POST_HEADERS
from tests.support.processes import free_port
from tests.support.profiles import TENANTS
from tests.system.test_lean_path import PREVIEW, READS, lean_config, lean_path_of, seen

pytestmark = pytest.mark.anyio

OFF: Callable[[str], bool] = lambda name: False  # noqa: E731 - the lean path's predicate, answering nothing


@dataclass
class Case:
    label: str
    lean: bool
    """Whether the lean path answers it (else the SDK does)."""
    body: Any = None
    arguments: dict[str, Any] | None = field(default_factory=dict)
    tool: str = TENANTS.list_tool
    headers: dict[str, str | None] = field(default_factory=dict)
    """Changes to the session's headers (None removes one)."""
    params: dict[str, Any] = field(default_factory=dict)
    """Added to the call's params."""
    raw: bytes | None = None

    def request(self, session: dict[str, str]) -> tuple[dict[str, str], bytes]:
        headers = {**session, **self.headers}
        sent = {name: value for name, value in headers.items() if value is not None}
        if self.raw is not None:
            return sent, self.raw
        body = self.body
        if body is None:
            params: dict[str, Any] = {"name": self.tool, **self.params}
            if self.arguments is not None:
                params["arguments"] = self.arguments
            body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}
        return sent, json.dumps(body).encode()


def call(params: Any, request_id: Any = 7) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


CORPUS = [
    # Answered on the lean path.
    *(Case(label, lean=True, tool=tool, arguments=arguments) for label, tool, arguments in READS),
    Case("a string id", lean=True, body=call({"name": TENANTS.list_tool, "arguments": {}}, "req-1")),
    Case("a progress token", lean=True, params={"_meta": {"progressToken": "p1"}}),
    Case("the 2026 envelope in a 2025 session", lean=True, params={"_meta": ENVELOPE}),
    Case("an extra header of the client's own", lean=True, headers={"x-trace": "abc"}),
    Case("JSON answers only", lean=True, headers={"accept": "application/json"}),
    Case("no protocol version header", lean=True, headers={"mcp-protocol-version": None}),
    # Answered by the SDK: everything else, and anything a check refuses.
    Case("a write tool", lean=False, tool=TENANTS.write_tool, arguments={"planId": "p", "idempotencyKey": "k" * 16}),
    Case("a requestState", lean=False, params={"requestState": "forged"}),
    Case("a task", lean=False, params={"task": {"ttl": 60000}}),
    Case("another content type", lean=False, headers={"content-type": "text/plain"}),
    Case("event streams only", lean=False, headers={"accept": "text/event-stream"}),
    Case("a notification", lean=False, body={"jsonrpc": "2.0", "method": "notifications/progress", "params": {}}),
    Case("a batch", lean=False, body=[call({"name": TENANTS.list_tool})]),
    Case("not JSON", lean=False, raw=b"{not json"),
    Case("a boolean id", lean=False, body=call({"name": TENANTS.list_tool}, True)),
    Case("a name that is not a string", lean=False, body=call({"name": 5})),
    Case("no params", lean=False, body={"jsonrpc": "2.0", "id": 7, "method": "tools/call"}),
    Case("arguments that are not an object", lean=False, arguments=["a"]),  # type: ignore[arg-type]
    Case("tools/list", lean=False, body={"jsonrpc": "2.0", "id": 7, "method": "tools/list"}),
    Case("another session's id", lean=False, headers={"mcp-session-id": "0" * 32}),
    Case("no session id", lean=False, headers={"mcp-session-id": None}),
]

VERSIONS = ["2025-11-25", "2025-06-18", "2025-03-26"]


@pytest.mark.parametrize("version", VERSIONS)
async def test_each_request_in_a_session_is_answered_as_the_sdk_answers_it(tmp_path: Path, version: str) -> None:
    async with session_gateway(tmp_path) as (url, reads, lean_answers), httpx.AsyncClient(timeout=30) as http:
        # Two sessions alike, each sent the whole corpus in order: the event ids of a write's stream count every
        # answer of its session, so they match only if the lean path keeps the count as the SDK does.
        session, other = await open_session(http, url, version), await open_session(http, url, version)
        for case in CORPUS:
            before = lean_answers()
            on, off = await both_ways(http, url, reads, case, session, other)
            assert seen(on) == seen(off), case.label
            assert (lean_answers() != before) == case.lean, case.label
            assert on.status_code < 500, case.label
        page = await http.post(url, headers=session, content=json.dumps(call({"name": TENANTS.list_tool})))
    assert json.loads(page.text)["result"]["structuredContent"]["tenants"]


async def test_a_session_that_has_not_been_answered_an_initialize_goes_to_the_sdk(tmp_path: Path) -> None:
    """The lean path learns a session's version from its initialize's answer; a failed initialize teaches it
    nothing, and the session's calls then get the SDK's answers."""
    async with session_gateway(tmp_path) as (url, _, lean_answers), httpx.AsyncClient(timeout=30) as http:
        opening = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25"}}
        answer = await http.post(url, headers=POST_HEADERS, content=json.dumps(opening))
        assert json.loads(answer.text)["error"]["code"] == types.INVALID_PARAMS  # no capabilities, no clientInfo
        session = {**POST_HEADERS, "mcp-session-id": answer.headers["mcp-session-id"]}
        refused = await http.post(url, headers=session, content=json.dumps(call({"name": TENANTS.list_tool})))
        assert lean_answers() == 0
    assert json.loads(refused.text)["error"]["code"] == types.INVALID_PARAMS  # the SDK's gate: not initialized


@pytest.mark.parametrize("how", ["cancelled", "deleted"])
async def test_a_call_in_flight_ends_as_the_sdks_does(tmp_path: Path, how: str) -> None:
    """A read the client cancels answers -32800 "Request cancelled"; one whose session is deleted under it answers
    the SDK's 500. Both paths are held at the handler until the cancel or the delete has been sent."""
    answers = []
    async with session_gateway(tmp_path) as (url, reads, lean_answers), httpx.AsyncClient(timeout=30) as http:
        held = hold_the_handler(reads)
        for predicate in (reads.lean, OFF):
            reads.lean = predicate
            session = await open_session(http, url, "2025-11-25")
            async with anyio.create_task_group() as group:
                reply: list[httpx.Response] = []

                async def read(session: dict[str, str] = session, reply: list[httpx.Response] = reply) -> None:
                    reply.append(await http.post(url, headers=session, content=json.dumps(call({"name": "x"}, 9))))

                group.start_soon(read)
                await held.wait()
                if how == "cancelled":
                    note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 9}}
                    accepted = await http.post(url, headers=session, content=json.dumps(note))
                    assert accepted.status_code == 202
                else:
                    assert (await http.delete(url, headers=session)).status_code == 200
            answers.append(reply[0])
        assert lean_answers() == 1
    on, off = answers
    assert seen(on) == seen(off)
    if how == "cancelled":
        assert json.loads(on.text)["error"] == {"code": -32800, "message": "Request cancelled"}
    else:
        assert on.status_code == 500


async def test_a_hidden_tool_in_a_session_takes_the_path_an_unknown_one_takes(tmp_path: Path) -> None:
    """A caller without the write scope: the write tool is hidden from it, so its call answers as an unknown
    tool's, on the same path, and reaches no backend."""
    reader = {"authorization": "Bearer lean-reader"}
    async with (
        session_gateway(tmp_path, auth=True) as (url, reads, lean_answers),
        httpx.AsyncClient(timeout=30) as http,
    ):
        session = await open_session(http, url, "2025-11-25", reader)
        other = await open_session(http, url, "2025-11-25", reader)
        preview = call({"name": TENANTS.preview_tool, "arguments": PREVIEW})
        plan = json.loads((await http.post(url, headers=session, content=json.dumps(preview))).text)
        writes = TENANTS.write_count(tmp_path / "backend.db")
        arguments = {"planId": plan["result"]["structuredContent"]["planId"], "idempotencyKey": "k" * 16}
        hidden = Case("a hidden write tool, with a real plan", lean=True, tool=TENANTS.write_tool, arguments=arguments)
        for case in (hidden, Case("a tool no one has", lean=True, tool="no_such_tool")):
            before = lean_answers()
            on, off = await both_ways(http, url, reads, case, session, other)
            assert seen(on) == seen(off), case.label
            assert lean_answers() == before + 1, case.label
        assert json.loads(on.text)["error"]["code"] == types.INVALID_PARAMS
    assert TENANTS.write_count(tmp_path / "backend.db") == writes  # the hidden write reached no backend


async def both_ways(
    http: httpx.AsyncClient, url: str, reads: SessionReads, case: Case, session: dict[str, str], other: dict[str, str]
) -> tuple[httpx.Response, httpx.Response]:
    """The case's answers: in ``session`` with the lean path on, then in ``other`` with it off."""
    headers, body = case.request(session)
    on = await http.post(url, headers=headers, content=body)
    predicate, reads.lean = reads.lean, OFF
    try:
        headers, body = case.request(other)
        off = await http.post(url, headers=headers, content=body)
    finally:
        reads.lean = predicate
    return on, off


class Held:
    """The tools/call handler of both paths, held until cancelled (it signals each time a call reaches it)."""

    def __init__(self) -> None:
        self.reached = anyio.Event()

    async def wait(self) -> None:
        with anyio.fail_after(10):
            await self.reached.wait()
        self.reached = anyio.Event()

    async def handler(self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams) -> Any:
        self.reached.set()
        await anyio.sleep_forever()


def hold_the_handler(reads: SessionReads) -> Held:
    held = Held()
    server = reads.kernel.server
    server.add_request_handler("tools/call", types.CallToolRequestParams, held.handler)
    reads.handler = held.handler
    return held


async def open_session(
    http: httpx.AsyncClient, url: str, version: str, extra: dict[str, str] | None = None
) -> dict[str, str]:
    """Initialize a session at ``version`` (with ``extra`` headers): the headers its requests carry."""
    opening = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    answer = await http.post(url, headers={**POST_HEADERS, **(extra or {})}, content=json.dumps(opening))
    assert json.loads(answer.text)["result"]["protocolVersion"] == version
    headers = {
        **POST_HEADERS,
        **(extra or {}),
        "mcp-session-id": answer.headers["mcp-session-id"],
        "mcp-protocol-version": version,
    }
    assert (await http.post(url, headers=headers, content=json.dumps(INITIALIZED))).status_code == 202
    return {name.lower(): value for name, value in headers.items()}


@asynccontextmanager
async def session_gateway(
    tmp_path: Path, *, auth: bool = False
) -> AsyncIterator[tuple[str, SessionReads, Callable[[], int]]]:
    """A gateway over a real backend process, served on a port: its /mcp URL, its sessions' lean path, and how
    many requests that path has answered so far (``auth``: as lean_config's)."""
    port = free_port()
    config = lean_config(tmp_path, auth=auth, port=port)
    async with open_gateway(config) as gw:
        app = build_app(gw)
        reads = lean_path_of(app.endpoint).sdk.session_manager.reads  # type: ignore[attr-defined]
        assert isinstance(reads, SessionReads)
        answered = [0]
        answer = reads.answer

        async def counted(*args: Any) -> bool:
            took = await answer(*args)
            answered[0] += took
            return took

        reads.answer = counted  # type: ignore[method-assign,assignment]
        async with serve_asgi(app, port, lifespan="on"):
            yield f"http://127.0.0.1:{port}/mcp", reads, lambda: answered[0]
