"""A tool call straight over a stdio backend's pipes: the request the gateway sends on every call, without the
SDK dispatcher's per-request machinery (a memory stream, a cancel scope, a span, request models), and answered in
the SDK reader's own task (gateway.backend.stdio resolves the call's future as it reads the line).

What the SDK's ``send_request`` does for a ``tools/call`` is done here in the same order, with the SDK's own
functions where they decide something: the request's JSON is pydantic's (as the SDK's write is), the read timeout
starts once the line is written, a timed-out or cancelled call is followed by the courtesy
``notifications/cancelled``, an error answer raises ``MCPError``, and the result is checked as the SDK checks it
(``ttlMs`` clamped, the negotiated version's surface, a later revision's fields dropped, ``CallToolResult``).
Lane requests take negative ids, which the SDK's counter never mints, so the two never answer each other.

``client.McpBackend`` calls tools through the lane when the connection is a stdio child and tracing is off; with
tracing on the SDK's client makes the span and carries its trace context in ``_meta``, so every call takes the SDK.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from typing import Any

import anyio
import mcp_types as types
from mcp.client.session import _clamp_inbound_ttl, _later_revision_fields
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT, JSONRPCError, JSONRPCResponse
from mcp_types import methods as _methods
from pydantic_core import to_json

from gateway.backend.stdio import StdinWriter, StdoutReader

ABANDON_WRITE_SECONDS = 5.0
"""The longest the courtesy cancel of an abandoned call may take to write (the SDK's own bound)."""


class StdioLane:
    """``tools/call`` over one stdio connection's pipes; one per connection, beside the SDK's client, whose
    handshake settled the protocol ``version`` the results are checked at."""

    def __init__(self, reader: StdoutReader, writer: StdinWriter, version: str) -> None:
        self._reader = reader
        self._writer = writer
        self._version = version
        self._ids = itertools.count(-1, -1)

    async def call_tool(self, name: str, arguments: dict[str, Any], read_seconds: float) -> types.CallToolResult:
        """One tool call, as ``ClientSession.send_request(CallToolRequest(...))`` would make it: MCPError for an
        error answer, a timeout (``REQUEST_TIMEOUT``) or a closed connection (``CONNECTION_CLOSED``)."""
        request_id = next(self._ids)
        params = {"name": name, "arguments": arguments}
        line = to_json({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}) + b"\n"
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[JSONRPCResponse | JSONRPCError] = loop.create_future()
        timer: asyncio.TimerHandle | None = None
        written = False
        try:
            self._reader.expect(request_id, answer)
            await self._writer.send_line(line, request_id)
            written = True
            timer = loop.call_later(read_seconds, _expire, answer)
            message = await answer
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            raise MCPError(code=CONNECTION_CLOSED, message="Connection closed") from None
        except TimeoutError:
            await self._cancel(request_id, f"timed out after {read_seconds}s", shield=False)
            raise MCPError(code=REQUEST_TIMEOUT, message="Request 'tools/call' timed out") from None
        except asyncio.CancelledError:
            if written:
                await self._cancel(request_id, "caller cancelled", shield=True)
            raise
        finally:
            if timer is not None:
                timer.cancel()
            self._reader.forget(request_id)
            if answer.done() and not answer.cancelled():
                answer.exception()  # failed while the write failed: seen here, not logged as never retrieved
        if isinstance(message, JSONRPCError):
            raise MCPError.from_error_data(message.error)
        return _checked(message.result, self._version)

    async def _cancel(self, request_id: int, reason: str, *, shield: bool) -> None:
        """The courtesy ``notifications/cancelled`` the SDK sends for an abandoned request (best effort)."""
        params = {"requestId": request_id, "reason": reason}
        notice = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params}
        closed = (anyio.BrokenResourceError, anyio.ClosedResourceError)
        with anyio.CancelScope(shield=shield), anyio.move_on_after(ABANDON_WRITE_SECONDS), contextlib.suppress(*closed):
            await self._writer.send_line(to_json(notice) + b"\n", None)


def _expire(answer: asyncio.Future[Any]) -> None:
    if not answer.done():
        answer.set_exception(TimeoutError())


def _checked(raw: dict[str, Any], version: str) -> types.CallToolResult:
    """The result as the SDK's client checks it for ``tools/call`` at ``version``."""
    _clamp_inbound_ttl(raw)
    with contextlib.suppress(KeyError):  # a version without a surface for tools/call
        _methods.validate_server_result("tools/call", version, raw)
    if not (foreign := _later_revision_fields("tools/call", version)).isdisjoint(raw):
        raw = {key: value for key, value in raw.items() if key not in foreign}
    return types.CallToolResult.model_validate(raw, by_name=False)
