"""The gateway's MCP client towards the legacy server, with liveness tracked here.

Errors are translated at this boundary into the two exceptions of gateway.backend: ``BackendUnavailable``
(never sent) and ``OutcomeLost`` (sent, no answer). One connection carries every concurrent call. When it
drops, the next call reconnects (a stdio child is respawned). The host's credentials never reach the backend:
HTTP headers come from the gateway's own environment.

Whether the backend is *reachable* is what a ping says, not whether a client object is held: a streamable-HTTP
client holds no socket between calls and a stdio client outlives its dead child until it writes. ``probe`` pings
over the connection (bounded by PROBE_SECONDS) and drops it when no pong comes; every call's fate updates the same
flag, which readiness and the ``gateway_backend_connected`` gauge report.

How a connection is opened is the one thing that differs between transports: ``McpBackend`` takes an opener,
``opener_for(config)`` builds the stdio or HTTP one, and tests pass one over the SDK's in-memory transport. A stdio
connection comes with a lane (gateway.backend.lane) that sends tool calls past the SDK's dispatcher; every other
request (the handshake, listings, pings), every call over HTTP or in memory, and every call while tracing is on
goes through the SDK's client.
Both wire transports (gateway.backend.stdio and gateway.backend.transports) stop reading an answer at
``backend.max_result_bytes``, and an answer's JSON is decoded within ``[limits] max_depth`` (gateway.records.Reply):
past either, the answer reads as malformed, which for a write means "sent and answered, re-read it". An answer is
not checked against the backend's own outputSchema here (the SDK's client would check it with Python's
backtracking ``re``, and the backend writes those patterns): the gateway checks what it relays with its own
validators (gateway.catalog.patterns: RE2).
"""

from __future__ import annotations

import json
import logging
import shutil
import sys
import time
import warnings
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import anyio
import httpx2
import mcp_types as types
from anyio.abc import TaskGroup, TaskStatus
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError

from gateway.backend import BackendUnavailable, OutcomeLost
from gateway.backend.lane import StdioLane
from gateway.backend.stdio import StdinWriter, StdoutReader, open_stdio
from gateway.backend.transports import RESULT_TOO_LARGE, CappedTransport
from gateway.config import BackendSection
from gateway.config.environ import current
from gateway.observability.tracing import inject_traceparent, recording, span
from gateway.records import Reply

log = logging.getLogger(__name__)


PROBE_SECONDS = 3.0
"""The longest a probe waits for the backend's pong (or its connect timeout, when shorter)."""

MAX_TOOL_PAGES = 100
"""A backend whose tools/list pages go on past this is not read further."""


@dataclass(frozen=True)
class Connected:
    """An open connection with a lane for its tool calls (a stdio child's)."""

    client: Client
    lane: StdioLane


Opener = Callable[[], AbstractAsyncContextManager[Client | Connected]]
"""Opens one client connection to the backend; entered in a task of its own and held until dropped."""


class McpBackend:
    """A long-lived client for the god-tool. Use as an async context manager."""

    def __init__(
        self,
        config: BackendSection,
        observe: Callable[[str, str, float], None] | None = None,
        opener: Opener | None = None,
        max_depth: int = 16,
        on_reachable: Callable[[bool], None] | None = None,
    ) -> None:
        self.config = config
        self.max_depth = max_depth
        self._open = opener or opener_for(config)
        self._observe = observe or (lambda action, result, seconds: None)
        self._client: Client | None = None
        self._lane: StdioLane | None = None
        self._dropped = anyio.Event()
        self._connect_lock = anyio.Lock()
        self._tasks: TaskGroup | None = None
        self._backoff = 0.0
        self._retry_at = 0.0
        self.connects = 0
        self.connect_attempts = 0
        self._on_reachable = on_reachable or (lambda reachable: None)
        self._reachable = False
        self._on_reachable(False)

    @property
    def reachable(self) -> bool:
        """Whether the last probe or call reached the backend (``on_reachable`` hears each change)."""
        return self._reachable

    @reachable.setter
    def reachable(self, reachable: bool) -> None:
        if reachable is not self._reachable:
            self._reachable = reachable
            self._on_reachable(reachable)

    async def __aenter__(self) -> McpBackend:
        self._tasks = anyio.create_task_group()
        await self._tasks.__aenter__()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._tasks is not None
        self._tasks.cancel_scope.cancel()
        await self._tasks.__aexit__(None, None, None)
        self._tasks = None

    @property
    def connected(self) -> bool:
        """Whether a live connection is held right now."""
        return self._client is not None

    async def call(self, action: str, payload: dict[str, Any], read_timeout: float | None = None) -> Reply:
        """Send one god-tool call; raise BackendUnavailable or OutcomeLost as documented above."""
        arguments = {self.config.action_argument: action, self.config.payload_argument: payload}
        return await self.call_tool(self.config.tool, arguments, read_timeout, label=action)

    async def call_tool(
        self, tool: str, arguments: dict[str, Any], read_timeout: float | None = None, *, label: str | None = None
    ) -> Reply:
        """Send one call of any of the backend's tools (``label`` names it in metrics, logs and its span; default
        the tool)."""
        label = label or tool
        with span(f"backend {label}"):
            return await self._call_tool(tool, arguments, read_timeout, label)

    async def _call_tool(self, tool: str, arguments: dict[str, Any], read_timeout: float | None, label: str) -> Reply:
        started = time.perf_counter()
        try:
            client = await self._connection()
        except BackendUnavailable:
            self._observe(label, "unavailable", time.perf_counter() - started)
            raise
        lane, timeout = self._lane, read_timeout or self.config.call_timeout_seconds
        try:
            if lane is not None and not recording():
                result = await lane.call_tool(tool, arguments, timeout)
            else:
                result = await client.session.send_request(  # not SDK-checked against its outputSchema: see above
                    types.CallToolRequest(params=types.CallToolRequestParams(name=tool, arguments=arguments)),
                    types.CallToolResult,
                    request_read_timeout_seconds=timeout,
                )
        except MCPError as exc:
            if exc.error.code != RESULT_TOO_LARGE:
                self._lost(label, client, started, exc)
            self._observe(label, "too_large", time.perf_counter() - started)
            return Reply(is_error=False, text="", max_depth=self.max_depth)  # answered, but not readable
        except Exception as exc:
            self._lost(label, client, started, exc)
        self.reachable = True
        self._observe(label, "error" if result.is_error else "ok", time.perf_counter() - started)
        return _reply(result, self.config.max_result_bytes, self.max_depth)

    def _lost(self, label: str, client: Client, started: float, exc: Exception) -> NoReturn:
        """A call sent on a live connection that got no answer: drop the connection, raise OutcomeLost."""
        log.warning("backend call %s lost: %s", label, type(exc).__name__)
        self.reachable = False
        self._observe(label, "lost", time.perf_counter() - started)
        if self._client is client:
            self._drop()
        raise OutcomeLost(label) from exc

    async def read(self, action: str, payload: dict[str, Any], read_timeout: float | None = None) -> Reply:
        """A call that changes nothing: retried once on a fresh connection if the first was lost."""
        arguments = {self.config.action_argument: action, self.config.payload_argument: payload}
        return await self.read_tool(self.config.tool, arguments, read_timeout, label=action)

    async def read_tool(
        self, tool: str, arguments: dict[str, Any], read_timeout: float | None = None, *, label: str | None = None
    ) -> Reply:
        """A call of any tool that changes nothing: retried once on a fresh connection if the first was lost."""
        try:
            return await self.call_tool(tool, arguments, read_timeout, label=label)
        except OutcomeLost:
            try:
                return await self.call_tool(tool, arguments, read_timeout, label=label)
            except OutcomeLost as exc:
                raise BackendUnavailable(label or tool) from exc

    async def list_tools(self) -> list[types.Tool]:
        """The backend's own tools, every page, within ``list_timeout_seconds`` (BackendUnavailable when they
        cannot be read). A listing that times out keeps the connection: a server can hang its tools/list and
        still answer calls in flight."""
        client = await self._connection()
        try:
            with anyio.fail_after(self.config.list_timeout_seconds):
                return await all_tools(client)
        except TimeoutError as exc:
            log.warning("backend tools/list got no answer in %.1fs", self.config.list_timeout_seconds)
            raise BackendUnavailable("tools/list timed out") from exc
        except Exception as exc:
            log.warning("backend tools/list lost: %s", type(exc).__name__)
            if self._client is client:
                self._drop()
            raise BackendUnavailable("tools/list") from exc

    async def probe(self) -> bool:
        """Whether the backend answers a ping now (a connection that gets no pong in time is dropped)."""
        try:
            client = await self._connection()
        except BackendUnavailable:
            return False
        try:
            with anyio.fail_after(min(PROBE_SECONDS, self.config.connect_timeout_seconds)), warnings.catch_warnings():
                # mcp 2.3 warns on every ping that 2026-07-28 dropped it; this client speaks the 2025 wire
                # (mode="legacy"), where ping is the protocol's own liveness check.
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                await client.send_ping()
        except Exception as exc:
            log.warning("backend ping got no answer: %s", _describe(exc))
            if self._client is client:
                self._drop()
            return False
        self.reachable = True
        return True

    def _drop(self) -> None:
        self.reachable = False
        self._client, self._lane = None, None
        self._dropped.set()

    async def _connection(self) -> Client:
        client = self._client
        if client is not None:  # the common case, without queueing on the lock every call
            return client
        async with self._connect_lock:
            if self._client is not None:
                return self._client
            if self._tasks is None:
                raise BackendUnavailable("backend not started")
            if anyio.current_time() < self._retry_at:
                raise BackendUnavailable("backing off after a failed connect")
            self.connect_attempts += 1
            try:
                with anyio.fail_after(self.config.connect_timeout_seconds):
                    await self._tasks.start(self._hold)
            except Exception as exc:
                # Back off (0.5 s doubling, up to the probe interval) so a dead backend is not respawned on every
                # call; past that the gateway's own watch (gateway.catalog.live) tries it once per interval.
                self._backoff = min(max(self._backoff * 2, 0.5), self.config.probe_interval_seconds)
                self._retry_at = anyio.current_time() + self._backoff
                log.warning("backend connect failed: %s; next try in %.1fs", _describe(exc), self._backoff)
                self.reachable = False
                raise BackendUnavailable("connect failed") from exc
            self._backoff = 0.0
            assert self._client is not None
            return self._client

    async def _hold(self, *, task_status: TaskStatus[None]) -> None:
        """Keep one connection open until it is dropped; its context lives in this one task."""
        started = False
        self._dropped = dropped = anyio.Event()
        try:
            async with self._open() as opened:
                if isinstance(opened, Connected):
                    self._client, self._lane = opened.client, opened.lane
                else:
                    self._client, self._lane = opened, None
                self.connects += 1
                started = True
                task_status.started()
                await dropped.wait()
        except Exception as exc:
            if not started:
                raise
            log.info("backend connection closed: %s", _describe(exc))
        finally:
            if self._dropped is dropped:
                self._client, self._lane = None, None


async def all_tools(client: Client) -> list[types.Tool]:
    """Every page of a server's ``tools/list`` (at most MAX_TOOL_PAGES)."""
    tools: list[types.Tool] = []
    cursor: str | None = None
    for _ in range(MAX_TOOL_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools += page.tools
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


def opener_for(config: BackendSection) -> Opener:
    """How to open a connection to the configured backend: a stdio child, or streamable HTTP."""

    def open_stdio() -> AbstractAsyncContextManager[Connected]:
        assert config.command is not None
        if config.cwd is not None:  # the built-in config's is the state directory, which may not exist yet
            Path(config.cwd).mkdir(parents=True, exist_ok=True)
        params = StdioServerParameters(
            command=resolve_command(config.command), args=list(config.args), env=_child_env(config.env), cwd=config.cwd
        )
        return _stdio_connection(params, config.max_result_bytes)

    def open_http() -> AbstractAsyncContextManager[Client]:
        assert config.url is not None
        headers = {name: current(var) for name, var in config.headers_from_env.items()}
        headers["accept-encoding"] = "identity"  # the cap counts the bytes as they arrive: no compressed bombs
        # One pooled transport per backend, kept alive between calls (tests/system/test_backend_connections.py).
        capped = CappedTransport(httpx2.AsyncHTTPTransport(), config.max_result_bytes)
        hooks = {"request": [inject_traceparent]}  # W3C trace context for the backend's HTTP side too
        http = httpx2.AsyncClient(
            headers=headers, timeout=config.call_timeout_seconds, transport=capped, event_hooks=hooks
        )
        transport = streamable_http_client(config.url, http_client=http, max_sse_event_size=config.max_result_bytes)
        return _client_over(transport, http)

    return open_http if config.transport == "http" else open_stdio


@asynccontextmanager
async def _stdio_connection(params: StdioServerParameters, max_bytes: int) -> AsyncIterator[Connected]:
    async with (
        open_stdio(params, max_bytes, sys.stderr) as (reader, writer),
        Client(_opened(reader, writer), mode="legacy") as client,
    ):
        version = client.session.protocol_version or "2025-11-25"  # the SDK's own fallback
        yield Connected(client, StdioLane(reader, writer, version))


@asynccontextmanager
async def _opened(reader: StdoutReader, writer: StdinWriter) -> AsyncIterator[tuple[StdoutReader, StdinWriter]]:
    """Streams already open, as the SDK's client takes a transport (they are closed by whoever opened them)."""
    yield reader, writer


@asynccontextmanager
async def _client_over(transport: Any, http: httpx2.AsyncClient | None) -> AsyncIterator[Client]:
    try:
        async with Client(transport, mode="legacy") as client:
            yield client
    finally:
        if http is not None:
            await http.aclose()


def _reply(result: types.CallToolResult, max_bytes: int, max_depth: int) -> Reply:
    text = next((block.text for block in result.content if isinstance(block, types.TextContent)), "")
    if result.structured_content is not None and not result.is_error:
        text = json.dumps(result.structured_content)
    if len(text) > max_bytes:
        # Too large to trust or parse: treated like a malformed answer (a write is then re-read).
        log.warning("backend answer of %d bytes exceeds backend.max_result_bytes", len(text))
        text = ""
    return Reply(is_error=bool(result.is_error), text=text, max_depth=max_depth)


def resolve_command(command: str) -> str:
    """Find a command on PATH, or beside the running interpreter (a venv's scripts are not always on PATH)."""
    found = shutil.which(command)
    if found is not None:
        return found
    beside = Path(sys.executable).parent / command
    return str(beside) if beside.exists() else command


def _child_env(extra: dict[str, str]) -> dict[str, str]:
    from mcp.client.stdio import get_default_environment

    return {**get_default_environment(), **extra}


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return ", ".join(_describe(inner) for inner in exc.exceptions)
    return type(exc).__name__
