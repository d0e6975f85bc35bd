"""The lean path: a 2026-07-28 ``tools/call`` of a tool that only reads, answered in the request's own task.

The SDK (mcp 2.3, mcp/server/_streamable_http_modern.py) answers each 2026-07-28 request by building a connection,
a dispatch context, a session, a handler kernel and its middleware chain, and, in the mode the gateway runs (a
handler may stream), a task group with a second task and a memory stream, before the gateway's handler starts. A
call of a tool whose kind only reads (gateway.tools.kinds.kind.Reads: read, preview, statement_query,
statement_preview, a relayed pass-through read) never streams, never asks the client, never uses the session and
never seals a requestState, so ``LeanCalls`` answers it itself: the same checks in the SDK's order, through the
SDK's own functions, the same handler (the one registered for ``tools/call``), the same result shaping (the
kernel's ``_serialize``) and the same bytes, status and headers on the wire (``_write``). So does a call whose
answer is "unknown tool" for its caller (no such tool, or one hidden from them): a hidden tool must not be told
from an unknown one by the path, and so the time, its answer takes (gateway.http.app.answered_lean decides).
tests/system/test_lean_path.py sends each of a corpus of requests to a gateway with and without this path and
compares the answers byte for byte.

Anything else goes to the SDK as it came, body included, and the SDK answers it, errors too: every other method and
era, a write tool the caller sees, a call carrying ``requestState``, ``inputResponses`` or a task, a request any
check would refuse, a body past ``[limits] max_body_bytes``, and every request while tracing is on (the SDK's
middleware makes the server span). Private parts of mcp 2.3 used here (pinned in pyproject.toml; the comparison
test fails when one changes what it answers): ``_mcp_param_rejection``, ``_write``, ``_sse_event``,
``_SSE_HEADERS`` and ``_SSE_PING_INTERVAL`` of the modern HTTP entry, and the kernel's ``_serialize``. A result
is encoded here as ``_write`` encodes it, without its second dump of the reply model.

A read that takes longer than the SDK's deferral window (15 s) gets what the SDK gives it: the answer switches to
an event stream with keep-alive pings, then carries the result as its one event. Unlike the SDK's, this path does
not cancel a read whose client went away: the read finishes and its answer is dropped.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any, TypeGuard

import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server import _streamable_http_modern as modern
from mcp.server.runner import ServerRunner, modern_error_data
from mcp.server.streamable_http import check_accept_headers
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from mcp.shared.inbound import InboundModernRoute, classify_inbound_request, find_duplicated_routing_header
from mcp_types import methods
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from gateway.http.bodies import read_capped, replayed
from gateway.observability import tracing

VERSION_HEADER = b"mcp-protocol-version"
STATELESS = b"2026-07-28"
KEPT_BY_THE_SDK = ("requestState", "inputResponses", "task")
"""Params a read has no use for, whose checks (unsealing, a task) the SDK's path owns."""


class LeanCalls:
    """ASGI app for /mcp: answers the calls described in the module docstring, hands the rest to ``sdk``."""

    def __init__(
        self,
        sdk: ASGIApp,
        server: Server[Any],
        *,
        lean: Callable[[str], bool],
        security: TransportSecuritySettings,
        max_body: int,
    ) -> None:
        self.sdk = sdk
        self.server = server
        self.lean = lean
        self.security = TransportSecurityMiddleware(security)
        self.max_body = max_body
        self.kernel = ServerRunner(server, None, None)  # type: ignore[arg-type]  # only _serialize is used
        entry = server.get_request_handler("tools/call")
        assert entry is not None
        self.handler = entry.handler

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or tracing.recording():
            await self.sdk(scope, receive, send)
            return
        if [value for name, value in scope["headers"] if name == VERSION_HEADER] != [STATELESS]:
            await self.sdk(scope, receive, send)
            return
        body, complete = await read_capped(receive, self.max_body)
        again = replayed(body, receive, complete=complete)
        if not complete or not await self._answer(scope, body, again, send):
            await self.sdk(scope, again, send)

    async def _answer(self, scope: Scope, body: bytes, receive: Receive, send: Send) -> bool:
        """Answer the request if it is one for this path (True); else leave it untouched for the SDK (False)."""
        request = Request(scope, receive)
        if await self.security.validate_request(request, is_post=True) is not None:
            return False
        has_json, has_sse = check_accept_headers(request)
        if not (has_json and has_sse):
            return False
        try:
            decoded = json.loads(body)
        except (ValueError, RecursionError):
            return False
        if not reading_call(decoded, self.lean):
            return False
        params = decoded["params"]
        try:
            req = types.JSONRPCRequest.model_validate(decoded)
        except ValidationError:
            return False
        if find_duplicated_routing_header(request.headers.items()) is not None:
            return False
        verdict = classify_inbound_request(decoded, headers=dict(request.headers))
        if not isinstance(verdict, InboundModernRoute):
            return False
        if await modern._mcp_param_rejection(self.server, request, req, verdict, None) is not None:
            return False
        version = verdict.protocol_version
        call = call_context(version, req.id, params, request)
        if call is None:
            return False
        ctx, typed = call
        reply = await self._reply(req.id, ctx, typed, version, scope, receive, send)
        if isinstance(reply, types.JSONRPCResponse):
            await _write_result(reply, scope, receive, send)
        elif reply is not None:
            await modern._write(reply, scope, receive, send)
        return True

    async def _reply(
        self,
        request_id: types.RequestId,
        ctx: ServerRequestContext[Any, Any],
        params: types.CallToolRequestParams,
        version: str,
        scope: Scope,
        receive: Receive,
        send: Send,
    ) -> types.JSONRPCResponse | types.JSONRPCError | None:
        """The handler's answer as the SDK shapes it; None once it went out on an event stream (a slow read)."""
        loop = asyncio.get_running_loop()
        stream = _SlowAnswer(send)
        timer = loop.call_later(modern._SSE_PING_INTERVAL, stream.open)
        try:
            result = await self.handler(ctx, params)
            reply: types.JSONRPCResponse | types.JSONRPCError = types.JSONRPCResponse(
                jsonrpc="2.0", id=request_id, result=self.kernel._serialize("tools/call", version, result)
            )
        except Exception as exc:
            reply = types.JSONRPCError(jsonrpc="2.0", id=request_id, error=modern_error_data(exc))
        finally:
            timer.cancel()
            await stream.stop()
        if not stream.opened:
            return reply
        await stream.finish(modern._sse_event(reply))
        return None


def reading_call(message: object, lean: Callable[[str], bool]) -> TypeGuard[dict[str, Any]]:
    """Whether a decoded body may be a call for a lean path: a ``tools/call`` request of a name ``lean`` takes,
    without any of the params the SDK's path keeps (``KEPT_BY_THE_SDK``). ``message["params"]`` is then a dict."""
    if not isinstance(message, dict) or message.get("method") != "tools/call" or "id" not in message:
        return False
    params = message.get("params")
    if not isinstance(params, dict) or any(params.get(key) is not None for key in KEPT_BY_THE_SDK):
        return False
    name = params.get("name")
    return isinstance(name, str) and lean(name)


def call_context(
    version: str,
    request_id: types.RequestId,
    params: dict[str, Any],
    request: Request,
    meta: types.RequestParamsMeta | None = None,
) -> tuple[ServerRequestContext[Any, Any], types.CallToolRequestParams] | None:
    """A reading call's context and typed params, as the SDK's kernel builds them but without a session (a read
    uses none: ``NO_SESSION``); None when the version's schema refuses the params (the SDK answers that)."""
    try:
        methods.validate_client_request("tools/call", version, params)
        typed = types.CallToolRequestParams.model_validate(params, by_name=False)
    except (KeyError, ValidationError):
        return None
    ctx: ServerRequestContext[Any, Any] = ServerRequestContext(
        session=NO_SESSION,  # type: ignore[arg-type]
        lifespan_context=None,
        protocol_version=version,
        method="tools/call",
        params=params,
        request_id=request_id,
        meta=meta,
        request=request,
    )
    return ctx, typed


async def _write_result(reply: types.JSONRPCResponse, scope: Scope, receive: Receive, send: Send) -> None:
    """What the SDK's ``_write`` sends for a result, without dumping the reply model again: ``_serialize`` made the
    result JSON's already, and a result's envelope has no field ``exclude_none`` could drop."""
    body = json.dumps({"jsonrpc": reply.jsonrpc, "id": reply.id, "result": reply.result}, separators=(",", ":"))
    await Response(body, status_code=200, media_type="application/json")(scope, receive, send)


class _SlowAnswer:
    """The event stream a read slower than the deferral window answers on, as the SDK's: headers and a ping when
    the window ends, a ping every window after, the answer as the last event."""

    def __init__(self, send: Send) -> None:
        self.send = send
        self._started = False
        self._pinged = False
        self._pinging: asyncio.Task[None] | None = None

    def open(self) -> None:
        """The window ended with the handler still running: start the stream (a task of its own)."""
        self._pinging = asyncio.get_running_loop().create_task(self._ping())

    @property
    def opened(self) -> bool:
        """Whether the answer goes out on the event stream (the window ended before the handler did)."""
        return self._pinging is not None

    async def _ping(self) -> None:
        await self._start()
        while True:
            await self._send_ping()
            await asyncio.sleep(modern._SSE_PING_INTERVAL)

    async def _send_ping(self) -> None:
        await self.send({"type": "http.response.body", "body": b": ping\r\n\r\n", "more_body": True})
        self._pinged = True

    async def _start(self) -> None:
        await self.send({"type": "http.response.start", "status": 200, "headers": modern._SSE_HEADERS})
        self._started = True

    async def stop(self) -> None:
        """Stop pinging (the handler is done, or the request is being cancelled)."""
        if self._pinging is not None:
            self._pinging.cancel()
            await asyncio.wait({self._pinging})  # its cancellation is its own; ours, if any, goes on up

    async def finish(self, last: bytes) -> None:
        """Send the answer as the stream's last event (its headers and first ping before it, if the pinging task
        was stopped before it sent them)."""
        if not self._started:
            await self._start()
        if not self._pinged:  # the SDK's stream always opens with one
            await self._send_ping()
        await self.send({"type": "http.response.body", "body": last, "more_body": False})


class _NoSession:
    """A lean call's session: a kind that only reads never uses one; one that did would fail loudly here."""

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(f"a call on the lean path has no session (ctx.session.{name})")


NO_SESSION = _NoSession()
