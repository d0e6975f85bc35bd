"""Stateful streamable HTTP that opens an SSE stream only for the requests that may need one.

Streamable HTTP lets a server answer each POSTed request either with one JSON body or with an SSE stream, and
only a stream can carry a request back to the client: the confirmation prompt a 2025-11-25 client gets before a
write. The SDK (mcp 2.3) fixes one answer mode per server. The gateway picks per request instead: a call to a tool
that may ask the user gets a stream, everything else (initialize, tools/list, reads, previews, pings) gets one
JSON body, which costs the gateway about 0.4 ms less CPU per call (bench/RESULTS.md).

Two SDK hooks carry this, both private to mcp 2.3 (pyproject.toml pins ``mcp>=2.3,<2.4`` for that reason and
tests/test_http_streams.py fails when either stops working): the session manager's ``_admit_session``, which builds
a session's transport, and the transport's ``_handle_post_request``, whose reads of ``is_json_response_enabled``
this transport answers per request through a context variable. The transport's message router runs in the
session's own task, where the variable keeps its default, so it routes messages exactly as in SSE mode; a request
answered with JSON must therefore not cause messages related to it, which holds because no read or preview
handler sends any.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from contextvars import ContextVar
from typing import Any

from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

_answer_with_json: ContextVar[bool] = ContextVar("answer_with_json", default=False)

StreamNeeded = Callable[[object], bool]
"""Given a POST body's decoded JSON, whether the request may need a stream (to ask the client something)."""


def stream_unless_read_only(read_only_tools: Iterable[str]) -> StreamNeeded:
    """JSON for every request except ``tools/call`` of a tool outside ``read_only_tools`` (writes, and unknown
    names whose answer is an error either way). Batches and unparseable bodies take the SDK's SSE path."""
    json_tools = frozenset(read_only_tools)

    def needs_stream(message: object) -> bool:
        if not isinstance(message, dict):
            return True
        if message.get("method") != "tools/call":
            return False
        params = message.get("params")
        return not isinstance(params, dict) or params.get("name") not in json_tools

    return needs_stream


class PerRequestTransport(StreamableHTTPServerTransport):
    """A session's transport that answers with JSON unless ``needs_stream`` says the request may ask the client."""

    def __init__(self, *, needs_stream: StreamNeeded, **kwargs: Any) -> None:
        self._needs_stream = needs_stream
        super().__init__(**kwargs)

    @property
    def is_json_response_enabled(self) -> bool:
        return _answer_with_json.get()

    @is_json_response_enabled.setter
    def is_json_response_enabled(self, value: bool) -> None:
        """The SDK's constructor sets one mode per server; this transport decides per request instead."""

    async def _handle_post_request(self, scope: Scope, request: Request, receive: Receive, send: Send) -> None:
        body = await request.body()  # Starlette keeps it: the SDK's own read below gets the same bytes
        try:
            message: object = json.loads(body)
        except (ValueError, RecursionError):
            message = None  # the SDK answers the parse error
        token = _answer_with_json.set(not self._needs_stream(message))
        try:
            await super()._handle_post_request(scope, request, receive, send)
        finally:
            _answer_with_json.reset(token)


class PerRequestSessionManager(StreamableHTTPSessionManager):
    """The SDK's stateful session manager, building :class:`PerRequestTransport` sessions."""

    def __init__(self, *, needs_stream: StreamNeeded, **kwargs: Any) -> None:
        self._needs_stream = needs_stream
        super().__init__(**kwargs)

    def _admit_session(self, requestor: Any) -> StreamableHTTPServerTransport | None:
        # The SDK's own method keeps the session limit and records the session's owner; its transport is then
        # swapped, under the same session id, for one that picks the answer mode per request.
        transport = super()._admit_session(requestor)
        if transport is None:
            return None
        session_id = transport.mcp_session_id
        assert session_id is not None
        replacement = PerRequestTransport(
            needs_stream=self._needs_stream,
            mcp_session_id=session_id,
            is_json_response_enabled=False,
            event_store=self.event_store,
            security_settings=self.security_settings,
            retry_interval=self.retry_interval,
            idle_timeout=self.session_idle_timeout,
        )
        self._server_instances[session_id] = replacement
        return replacement
