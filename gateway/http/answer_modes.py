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
preview handler sends any. A write tool hidden from the caller gets no stream either: it must answer exactly like
an unknown tool, and an event stream instead of a JSON body would give it away.

Each session also gets its own event store, so a stream that drops while a write waits for its prompt (a proxy's
idle timeout, a laptop changing networks) can be resumed: the stream opens with a priming event that carries an
id and a ``retry`` hint, and a GET with ``Last-Event-ID`` replays what the client missed and then follows the
stream to its answer. The store keeps only the events of streamed requests (and of the session's GET stream),
at most ``MAX_EVENTS`` per session, and goes away with the session. One store per session matters: the SDK names
a request's stream by its JSON-RPC id, and ids repeat across sessions.

Sessions cost memory (tens of KB each) and the table is bounded (``max_sessions``), so one caller must not fill
it. A request that would open a session first takes a place in its caller's quota (gateway/http/quota.py) and a
token from the caller's rate-limit bucket, or gets HTTP 429; and a session that has not called a tool yet expires
after ``unused_idle`` seconds without a request in flight instead of the full idle timeout. Two more private hooks
carry this: the manager's ``_handle_stateful_request`` (only a POSTed ``initialize`` without a session id opens
one; anything else gets 400 and no session id, and costs no token) and ``_discard_session`` (every way a session
ends passes there, so its place is given back); the transport's idle countdown is shortened through its public
``idle_scope``. tests/system/test_session_limits.py guards them.

A call of a reading tool in a session is answered by gateway/http/session_reads.py without the session's dispatcher
(``reads``). The transport keeps what that path needs from the SDK's side of the session: the version an
``initialize`` negotiated and the ``notifications/cancelled`` the SDK accepted (both seen where the SDK builds its
JSON answer, ``_create_json_response``, private to mcp 2.3), and the session's end (``terminate``).
"""

from __future__ import annotations

import json
import math
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable
from contextvars import ContextVar
from dataclasses import dataclass
from http import HTTPStatus
from itertools import count
from typing import Any

import anyio
import pydantic_core
from mcp.server.streamable_http import (
    GET_STREAM_KEY,
    MCP_SESSION_ID_HEADER,
    EventCallback,
    EventId,
    EventMessage,
    EventStore,
    StreamableHTTPServerTransport,
    StreamId,
)
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp_types import INTERNAL_ERROR, INVALID_REQUEST, ErrorData, JSONRPCError, JSONRPCMessage, JSONRPCResponse
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from gateway.errors import Code, StoreUnavailable
from gateway.http.bodies import read_capped, replayed
from gateway.http.quota import Opening, SessionQuota
from gateway.http.session_reads import ReadingSession, SessionReads

_answer_with_json: ContextVar[bool] = ContextVar("answer_with_json", default=False)
_posted: ContextVar[object] = ContextVar("posted", default=None)
"""The decoded body of the POST the SDK's transport is handling (None if it is not JSON)."""
_opening: ContextVar[Opening | None] = ContextVar("opening", default=None)

MAX_EVENTS = 64
"""Events one session keeps for resuming its streams (a write's stream holds three or four); oldest go first."""
RETRY_MS = 1000
"""The ``retry`` hint of a stream's priming event: how soon a client reconnects after a drop."""

StreamNeeded = Callable[[object], bool]
"""Given a POST body's decoded JSON, whether the request may need a stream (to ask the client something)."""


def stream_for_tools(asking_tools: Iterable[str], visible: Callable[[str], bool]) -> StreamNeeded:
    """A stream for ``tools/call`` of one of ``asking_tools`` (the write tools, which may prompt) that is
    ``visible`` to this request's caller; one JSON body for everything else, unknown tools and tools hidden from
    the caller included (their answer is the same error, and asks nothing)."""
    streamed = frozenset(asking_tools)

    def needs_stream(message: object) -> bool:
        if not isinstance(message, dict) or message.get("method") != "tools/call":
            return False
        params = message.get("params")
        name = params.get("name") if isinstance(params, dict) else None
        return name in streamed and visible(str(name))

    return needs_stream


@dataclass(frozen=True)
class SessionLimits:
    """What keeps one caller from filling the session table (see the module docstring)."""

    per_caller: int
    unused_idle_seconds: float
    caller: Callable[[], str]
    """The caller of the request being handled."""
    take_token: Callable[[str], Awaitable[float]]
    """Takes a token from the caller's rate-limit bucket: 0, or the seconds until one is free."""


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
    """A session's transport that answers with JSON unless ``needs_stream`` says the request may ask the client,
    and answers a call of a reading tool itself when ``reads`` is given (gateway/http/session_reads.py)."""

    def __init__(
        self,
        *,
        needs_stream: StreamNeeded,
        events: SessionEventStore,
        unused_idle: float,
        reads: SessionReads | None = None,
        **kwargs: Any,
    ) -> None:
        self._needs_stream = needs_stream
        self._events = events
        self._unused_idle = unused_idle
        self._called_a_tool = False
        self._reads = reads
        self._reading = ReadingSession()
        super().__init__(event_store=events, retry_interval=RETRY_MS, **kwargs)

    async def handle_request(self, scope: Scope, receive: Receive, send: Send) -> None:
        await super().handle_request(scope, receive, send)
        idle = self.idle_scope
        # The SDK restarted the idle countdown if nothing else is in flight (a finite deadline); until the session
        # calls a tool, the countdown is the short one.
        if not self._called_a_tool and idle is not None and not idle.cancel_called and math.isfinite(idle.deadline):
            idle.deadline = min(idle.deadline, anyio.current_time() + self._unused_idle)

    @property
    def is_json_response_enabled(self) -> bool:
        return _answer_with_json.get()

    @is_json_response_enabled.setter
    def is_json_response_enabled(self, value: bool) -> None:
        """The SDK's constructor sets one mode per server; this transport decides per request instead."""

    async def _handle_post_request(self, scope: Scope, request: Request, receive: Receive, send: Send) -> None:
        body = await request.body()  # Starlette keeps it: the SDK's own read below gets the same bytes
        try:
            message: object = pydantic_core.from_json(body)  # as the SDK decodes it
        except ValueError:
            message = None  # the SDK answers the parse error
        if isinstance(message, dict) and message.get("method") == "tools/call":
            self._called_a_tool = True
        streamed = self._needs_stream(message)
        if streamed and isinstance(message, dict) and isinstance(message.get("id"), str | int):
            self._events.streams(str(message["id"]))
        reads = self._reads
        if not streamed and reads is not None and reads.takes(message, self._reading):
            assert isinstance(message, dict)
            if await reads.answer(self, self._reading, request, message, send):
                return
        token = _answer_with_json.set(not streamed)
        posted = _posted.set(message)
        try:
            await super()._handle_post_request(scope, request, receive, send)
        finally:
            _posted.reset(posted)
            _answer_with_json.reset(token)

    def _create_json_response(
        self,
        response_message: JSONRPCMessage | None,
        status_code: HTTPStatus = HTTPStatus.OK,
        headers: dict[str, str] | None = None,
    ) -> Response:
        # The SDK answers here once it has taken the POST: an initialize's answer, and a notification's 202 just
        # before the notification goes to the session (a cancel then reaches a call on the lean path too).
        posted = _posted.get()
        if isinstance(posted, dict) and posted.get("method") == "initialize":
            self._reading.initialized(response_message)
        elif status_code == HTTPStatus.ACCEPTED:
            self._reading.cancelled(posted)
        return super()._create_json_response(response_message, status_code, headers)

    async def terminate(self) -> None:
        self._reading.ended()
        await super().terminate()


class PerRequestSessionManager(StreamableHTTPSessionManager):
    """The SDK's stateful session manager, building :class:`PerRequestTransport` sessions within each caller's
    quota and rate limit."""

    def __init__(
        self, *, needs_stream: StreamNeeded, limits: SessionLimits, reads: SessionReads | None = None, **kwargs: Any
    ) -> None:
        self._needs_stream = needs_stream
        self._limits = limits
        self.reads = reads
        self._quota = SessionQuota(limits.per_caller)
        super().__init__(**kwargs)

    async def _handle_stateful_request(self, scope: Scope, receive: Receive, send: Send) -> None:
        if MCP_SESSION_ID_HEADER in Headers(scope=scope):
            await super()._handle_stateful_request(scope, receive, send)
            return
        # Only a POSTed initialize opens a session; the SDK would open one here only to refuse anything else and
        # hand out its id, which then answers 404 (and the caller would have paid a token of their bucket for it).
        refused = scope["method"] != "POST"
        if not refused:
            body, complete = await read_capped(receive, self.max_request_body_size)
            receive = replayed(body, receive, complete=complete)
            refused = complete and _not_an_initialize(body)
        if refused:
            message = "Bad Request: Missing session ID (a session opens with a POSTed initialize)."
            await _refusal(400, None, message)(scope, receive, send)
            return
        caller = self._limits.caller()
        opening = self._quota.reserve(caller)
        if opening is None:
            message = f"This caller already holds {self._limits.per_caller} open sessions; reuse or end one."
            await _refusal(429, Code.TOO_MANY_SESSIONS, message)(scope, receive, send)
            return
        token = _opening.set(opening)
        try:
            try:
                wait = await self._limits.take_token(caller)
            except StoreUnavailable:
                # The bucket lives in the shared store: fail closed, as a tool call would.
                # The caller did nothing wrong: a server-side error (-32603), with the code a tool call would get.
                message = "The gateway's state store cannot be reached; no session was opened. Retry later."
                await _refusal(503, Code.STORE_UNAVAILABLE, message, rpc=INTERNAL_ERROR)(scope, receive, send)
                return
            if wait > 0:
                seconds = math.ceil(wait * 10) / 10
                message = f"Too many calls. Retry in {seconds} seconds."
                await _refusal(429, Code.RATE_LIMITED, message, seconds)(scope, receive, send)
                return
            await super()._handle_stateful_request(scope, receive, send)
        finally:
            _opening.reset(token)
            self._quota.settle(opening)

    def _admit_session(self, requestor: Any) -> StreamableHTTPServerTransport | None:
        # The SDK's own method keeps the session limit and records the session's owner; its transport is then
        # swapped, under the same session id, for one that picks the answer mode per request.
        transport = super()._admit_session(requestor)
        if transport is None:
            return None
        session_id = transport.mcp_session_id
        assert session_id is not None
        opening = _opening.get()
        if opening is not None:
            self._quota.admit(opening, session_id)
        replacement = PerRequestTransport(
            needs_stream=self._needs_stream,
            events=SessionEventStore(),
            unused_idle=self._limits.unused_idle_seconds,
            reads=self.reads,
            mcp_session_id=session_id,
            is_json_response_enabled=False,
            security_settings=self.security_settings,
            idle_timeout=self.session_idle_timeout,
        )
        self._server_instances[session_id] = replacement
        return replacement

    async def _discard_session(self, session_id: str, transport: StreamableHTTPServerTransport) -> None:
        self._quota.discard(session_id)
        await super()._discard_session(session_id, transport)


def _not_an_initialize(body: bytes) -> bool:
    """Whether a body is a JSON-RPC message other than ``initialize`` (what is not JSON, or not one object, the SDK
    answers as it does any malformed body)."""
    try:
        message = json.loads(body)
    except (ValueError, RecursionError):
        return False
    return isinstance(message, dict) and message.get("method") != "initialize"


def _refusal(
    status: int, code: Code | None, message: str, retry_after: float | None = None, rpc: int = INVALID_REQUEST
) -> Response:
    """An HTTP refusal with a JSON-RPC error (``rpc``: -32600 unless the fault is the server's) whose ``data``
    carries the gateway's code, if it has one (and the wait, if known)."""
    data: dict[str, Any] = {} if code is None else {"code": code.value}
    headers = {}
    if retry_after is not None:
        data["retryAfterSeconds"] = retry_after
        headers["Retry-After"] = str(max(1, math.ceil(retry_after)))
    error = ErrorData(code=rpc, message=message, **({"data": data} if data else {}))
    body = JSONRPCError(jsonrpc="2.0", id=None, error=error)
    return Response(
        body.model_dump_json(by_alias=True, exclude_unset=True),
        status_code=status,
        media_type="application/json",
        headers=headers,
    )
