"""Stateful streamable HTTP that opens an SSE stream only for the requests that may need one.

Streamable HTTP lets a server answer each POSTed request either with one JSON body or with an SSE stream, and
only a stream can carry a request back to the client: the confirmation prompt a 2025-11-25 client gets before a
write. The SDK (mcp 2.3) fixes one answer mode per server. The gateway picks per request instead: a call to a write tool
(which may ask the user) gets a stream, everything else (initialize, tools/list, reads, previews, pings, unknown
tools) gets one JSON body, which costs the gateway about 0.4 ms less CPU per call (bench/RESULTS.md).

Two SDK hooks carry this, both private to mcp 2.3 (pyproject.toml pins ``mcp>=2.3,<2.4`` for that reason and
tests/system/test_http_sessions.py fails when either stops working): the session manager's ``_admit_session``, which
builds a session's transport, and the transport's ``_handle_post_request``, whose reads of
``is_json_response_enabled`` this transport answers per request through a context variable. The transport's message
router runs in the session's own task, where the variable keeps its default, so it routes messages exactly as in SSE
mode; a request answered with JSON must therefore not cause messages related to it, which holds because no read or
preview handler sends any.

Each session also gets its own event store, so a stream that drops while a write waits for its prompt (a proxy's
idle timeout, a laptop changing networks) can be resumed: the stream opens with a priming event that carries an
id and a ``retry`` hint, and a GET with ``Last-Event-ID`` replays what the client missed and then follows the
stream to its answer. The store keeps only the events of streamed requests (and of the session's GET stream),
at most ``MAX_EVENTS`` per session, and goes away with the session. One store per session matters: the SDK names
a request's stream by its JSON-RPC id, and ids repeat across sessions.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable, Iterable
from contextvars import ContextVar
from itertools import count
from typing import Any

from mcp.server.streamable_http import (
    GET_STREAM_KEY,
    EventCallback,
    EventId,
    EventMessage,
    EventStore,
    StreamableHTTPServerTransport,
    StreamId,
)
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp_types import JSONRPCError, JSONRPCMessage, JSONRPCResponse
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

_answer_with_json: ContextVar[bool] = ContextVar("answer_with_json", default=False)

MAX_EVENTS = 64
"""Events one session keeps for resuming its streams (a write's stream holds three or four); oldest go first."""
RETRY_MS = 1000
"""The ``retry`` hint of a stream's priming event: how soon a client reconnects after a drop."""

StreamNeeded = Callable[[object], bool]
"""Given a POST body's decoded JSON, whether the request may need a stream (to ask the client something)."""


def stream_for_tools(asking_tools: Iterable[str]) -> StreamNeeded:
    """A stream for ``tools/call`` of one of ``asking_tools`` (the write tools, which may prompt); one JSON body
    for everything else, unknown and hidden tool names included (their answer is an error, and asks nothing)."""
    streamed = frozenset(asking_tools)

    def needs_stream(message: object) -> bool:
        if not isinstance(message, dict) or message.get("method") != "tools/call":
            return False
        params = message.get("params")
        return isinstance(params, dict) and params.get("name") in streamed

    return needs_stream


class SessionEventStore(EventStore):
    """One session's resumable events: those of the streams it opened (see the module docstring)."""

    def __init__(self, max_events: int = MAX_EVENTS) -> None:
        self._max_events = max_events
        self._ids = count(1)
        self._streamed: set[StreamId] = {GET_STREAM_KEY}
        self._events: OrderedDict[EventId, tuple[StreamId, JSONRPCMessage | None]] = OrderedDict()

    def streams(self, stream_id: StreamId) -> None:
        """Keep the events of this request's stream (called before the request is handled)."""
        self._streamed.add(stream_id)

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        event_id = str(next(self._ids))
        if stream_id in self._streamed:
            self._events[event_id] = (stream_id, message)
            while len(self._events) > self._max_events:
                gone, _ = self._events.popitem(last=False)[1]
                if gone not in (event[0] for event in self._events.values()) and gone != GET_STREAM_KEY:
                    self._streamed.discard(gone)
        return event_id

    async def replay_events_after(self, last_event_id: EventId, send_callback: EventCallback) -> StreamId | None:
        """Send the stream's events after ``last_event_id``. The stream's id is returned only while its request
        is unanswered, so the SDK goes on to follow it; an answered stream's replay ends after its answer."""
        if last_event_id not in self._events:
            return None
        stream_id = self._events[last_event_id][0]
        answered, after = False, False
        for event_id, (stream, message) in list(self._events.items()):
            if stream != stream_id:
                continue
            answered = answered or isinstance(message, JSONRPCResponse | JSONRPCError)
            if after and message is not None:
                await send_callback(EventMessage(message, event_id))
            after = after or event_id == last_event_id
        return None if answered else stream_id


class PerRequestTransport(StreamableHTTPServerTransport):
    """A session's transport that answers with JSON unless ``needs_stream`` says the request may ask the client."""

    def __init__(self, *, needs_stream: StreamNeeded, events: SessionEventStore, **kwargs: Any) -> None:
        self._needs_stream = needs_stream
        self._events = events
        super().__init__(event_store=events, retry_interval=RETRY_MS, **kwargs)

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
        streamed = self._needs_stream(message)
        if streamed and isinstance(message, dict) and isinstance(message.get("id"), str | int):
            self._events.streams(str(message["id"]))
        token = _answer_with_json.set(not streamed)
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
            events=SessionEventStore(),
            mcp_session_id=session_id,
            is_json_response_enabled=False,
            security_settings=self.security_settings,
            idle_timeout=self.session_idle_timeout,
        )
        self._server_instances[session_id] = replacement
        return replacement
