"""The lean path of a 2025-era session: a ``tools/call`` of a tool that only reads, answered in the POST's own task.

In a 2025-11-25 (or older) session the SDK (mcp 2.3, mcp/server/streamable_http.py) answers each POSTed request by
sending it down the session's memory stream to the session's dispatcher task, which spawns a task for it, builds a
dispatch context, a session object and the middleware chain, runs the handler, and sends the answer back through the
transport's message router and the request's own memory stream to the waiting POST. A call whose answer is one JSON
body (a tool whose kind only reads, or a name that is "unknown tool" for its caller: gateway.http.app.answered_lean
decides, as for the 2026 path in gateway/http/lean.py) needs none of that, so ``SessionReads`` answers it where the
POST arrived: the SDK's checks in its order (through its own functions), the handler registered for ``tools/call``,
the kernel's result shaping (``_serialize``, for the session's version) and the transport's JSON answer
(``_create_json_response``), with the same bytes, status and headers. tests/system/test_session_reads.py sends
each of a corpus of requests to a session with and without this path and compares the answers byte for byte.

What a session keeps for it (``ReadingSession``, one per transport: gateway/http/answer_modes.py):

    version    the protocol version the session's ``initialize`` negotiated, taken from its answer: the version
               the SDK's connection then holds, which the handler sees as ``ctx.protocol_version`` and which
               picks the schema ``_serialize`` sieves the result through. Until an initialize has been answered
               with a result, every call goes to the SDK (whose gate refuses it).
    running    the calls in flight here, so that ``notifications/cancelled`` for one interrupts it and it answers
               "Request cancelled" (-32800), and a session that ends (a DELETE, the gateway stopping) ends them
               with the 500 "Session terminated before the request completed", both as the SDK answers them.

Everything else goes to the SDK: other methods, a write tool the caller sees (it may ask the client), a call carrying
``requestState`` or a task, a request any check refuses, a call whose params its version's schema refuses, and every
request while tracing is on (the SDK's middleware makes the server span). A call answered here is numbered in the
session's event store as the SDK's message router numbers it (``store_event``, which keeps no event of a JSON answer),
so a later stream's event ids are the ones the SDK would give. Private parts of mcp 2.3 used here (pinned in
pyproject.toml; the comparison test fails when one changes what it answers): the kernel's ``_serialize``, the runner's
``_extract_meta`` and the transport's ``_create_json_response``, ``_create_error_response``, ``_check_content_type`` and
``_event_store``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.runner import ServerRunner, _extract_meta
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER, REQUEST_CANCELLED, check_accept_headers
from mcp.shared.dispatcher import as_request_id, coerce_request_id
from mcp.shared.exceptions import MCPError
from mcp.shared.jsonrpc_dispatcher import handler_exception_to_error_data
from pydantic import ValidationError
from starlette.requests import Request
from starlette.types import Send

from gateway.http.lean import call_context, reading_call
from gateway.observability import tracing

if TYPE_CHECKING:
    from mcp.server.streamable_http import StreamableHTTPServerTransport

log = logging.getLogger(__name__)

CANCELLED = types.ErrorData(code=REQUEST_CANCELLED, message="Request cancelled")
"""What the SDK answers a 2025 request its client cancelled (the 2025 wire ends a request only with an answer)."""


@dataclass
class _Running:
    scope: anyio.CancelScope
    cancelled: bool = False
    """The client cancelled it (else the session ended under it)."""


@dataclass
class ReadingSession:
    """What one session keeps for its calls on this path (see the module docstring)."""

    version: str | None = None
    running: dict[types.RequestId, _Running] = field(default_factory=dict)

    def initialized(self, answer: types.JSONRPCMessage | None) -> None:
        """An ``initialize`` of this session was answered: a result commits its version, as the SDK's connection."""
        version = answer.result.get("protocolVersion") if isinstance(answer, types.JSONRPCResponse) else None
        if isinstance(version, str):
            self.version = version

    def cancelled(self, message: object) -> None:
        """A notification came in: ``notifications/cancelled`` interrupts the call it names, if it runs here."""
        if not isinstance(message, dict) or message.get("method") != "notifications/cancelled":
            return
        params = message.get("params")
        named = as_request_id(params.get("requestId")) if isinstance(params, dict) else None
        if named is not None and (call := self.running.get(coerce_request_id(named))) is not None:
            call.cancelled = True
            call.scope.cancel()

    def ended(self) -> None:
        """The session is ending: so do its calls on this path."""
        for call in self.running.values():
            call.scope.cancel()


class SessionReads:
    """Answers, for every session of one server, the calls described in the module docstring."""

    def __init__(self, server: Server[Any], *, lean: Callable[[str], bool]) -> None:
        self.lean = lean
        self.kernel = ServerRunner(server, None, None)  # type: ignore[arg-type]  # only _serialize is used
        entry = server.get_request_handler("tools/call")
        assert entry is not None
        self.handler = entry.handler

    def takes(self, message: object, session: ReadingSession) -> bool:
        """Whether a decoded POST body is a call for this path (the checks that need no I/O)."""
        return session.version is not None and reading_call(message, self.lean) and not tracing.recording()

    async def answer(
        self,
        transport: StreamableHTTPServerTransport,
        session: ReadingSession,
        request: Request,
        message: dict[str, Any],
        send: Send,
    ) -> bool:
        """Answer the call (True), or leave it untouched for the SDK (False): ``takes`` said it may be one."""
        version = session.version
        assert version is not None
        if request.headers.get(MCP_SESSION_ID_HEADER) != transport.mcp_session_id:
            return False
        if not check_accept_headers(request)[0] or not transport._check_content_type(request):
            return False
        try:
            req = types.jsonrpc_message_adapter.validate_python(message, by_name=False)
        except ValidationError:
            return False
        if not isinstance(req, types.JSONRPCRequest) or req.params is None:
            return False
        call = call_context(version, req.id, req.params, request, _extract_meta(req.params))
        if call is None:
            return False
        ctx, typed = call
        reply = await self._reply(req.id, ctx, typed, version, session)
        scope, receive = request.scope, request.receive
        if reply is None:
            terminated = transport._create_error_response(
                "Session terminated before the request completed",
                HTTPStatus.INTERNAL_SERVER_ERROR,
                types.INTERNAL_ERROR,
            )
            await terminated(scope, receive, send)
            return True
        events = transport._event_store
        if events is not None:
            await events.store_event(str(req.id), reply)  # numbers the events as the SDK would (this one is not kept)
        await transport._create_json_response(reply)(scope, receive, send)
        return True

    async def _reply(
        self,
        request_id: types.RequestId,
        ctx: ServerRequestContext[Any, Any],
        params: types.CallToolRequestParams,
        version: str,
        session: ReadingSession,
    ) -> types.JSONRPCResponse | types.JSONRPCError | None:
        """The handler's answer as the SDK's dispatcher shapes it; None when the session ended under the call."""
        key = coerce_request_id(request_id)
        call = _Running(anyio.CancelScope())
        session.running[key] = call
        reply: types.JSONRPCResponse | types.JSONRPCError | None = None
        try:
            with call.scope:
                try:
                    result = await self.handler(ctx, params)
                    if isinstance(result, types.ErrorData):
                        raise MCPError.from_error_data(result)
                    shaped = self.kernel._serialize("tools/call", version, result)
                    reply = types.JSONRPCResponse(jsonrpc="2.0", id=request_id, result=shaped)
                except Exception as exc:
                    error = handler_exception_to_error_data(exc)
                    if error is None:
                        log.exception("handler for 'tools/call' raised")
                        error = types.ErrorData(code=0, message=str(exc))  # the SDK's dispatcher's catch-all
                    reply = types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error)
        finally:
            if session.running.get(key) is call:
                del session.running[key]
        if call.cancelled:
            return types.JSONRPCError(jsonrpc="2.0", id=request_id, error=CANCELLED)
        if call.scope.cancel_called:
            return None
        return reply
