"""The running gateway's parts in one object: config, backends, store, keys, clock, and the tool catalog.

``open_gateway`` opens them and changes nothing: start-up recovery (gateway.audit.trail.recover) is a step of
``serve`` alone, so ``check``, ``audit`` and the tests never settle another process's keys.

Each configured backend has its own client and reader; a tool reaches the one that serves it
(``backend_for`` / ``reader_for``). The published tools come from the live catalog (gateway.catalog.live): one
part per backend, loaded, pinged and reloaded on its own in the background, so a backend that hangs or dies takes
only its own tools away (for as long as it is down) and is picked up again without a restart. When the published
tools change, every 2025-era session that listed them and can hear it is sent ``notifications/tools/list_changed``,
and ``tools_version`` moves on for the 2026-era listen streams (gateway.mcp.listen).
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol
from weakref import WeakSet

import anyio
import mcp_types as types
from anyio.abc import TaskGroup

from gateway.approvals.notify import Notifier
from gateway.audit import sinks, trail
from gateway.audit.chain import ChainKeys
from gateway.audit.floods import RefusalCounter
from gateway.backend import Backend, BackendUnavailable, unreachable
from gateway.backend.client import McpBackend, Opener
from gateway.backend.reads import TargetReader
from gateway.catalog.live import LIST_WAIT, LiveCatalog
from gateway.catalog.published import Catalog, PublishedTool, build_catalog, needs
from gateway.config import GatewayConfig
from gateway.cursor import CursorCodec
from gateway.errors import ToolError
from gateway.identity.secrets import load_audit_keys, load_keys
from gateway.observability.metrics import Metrics
from gateway.ratelimit import RateLimiter
from gateway.stores import Store, open_store
from gateway.stores.timed import TimedStore
from gateway.write.unsettled import Unsettled

log = logging.getLogger(__name__)

STARTUP_SECONDS = 30.0
"""The longest ``serve`` waits for the backends' first loads before it answers (each is bounded by its own
timeouts; a backend still loading after this is left out until it is up)."""
NOTIFY_SECONDS = 5.0
"""The longest one session's list_changed may take to send; a session that takes longer stops listening."""


class Listener(Protocol):
    """A session that can be told the published tools changed."""

    async def send_tool_list_changed(self) -> None: ...


@dataclass
class Gateway:
    """Everything a request handler needs. Built once per process and shared by every connection."""

    config: GatewayConfig
    backends: dict[str, Backend]
    store: Store
    keys: list[bytes]
    clock: Callable[[], float] = time.time
    metrics: Metrics = field(default_factory=Metrics)
    unsettled: Unsettled = field(default_factory=Unsettled)
    refusals: RefusalCounter = field(default_factory=RefusalCounter)
    notifier: Notifier | None = None
    """Delivers approval webhooks in the background (started by open_gateway)."""
    sleep: Callable[[float], Awaitable[None]] = anyio.sleep
    """How a call waiting on the store pauses (an approval's decision); tests pass one that moves their clock."""
    list_wait: float = LIST_WAIT
    """How long a listing waits for a backend still being loaded (gateway.catalog.live); tests shorten it."""
    listen_read_seconds: float | None = None
    """How often a listen stream reads the tasks it follows when not READ_SECONDS (gateway.mcp.listen); tests
    shorten it."""
    served_at: str | None = None
    """The base URL this process serves HTTP at (set by ``serve``), for approval links when none is configured."""
    readers: dict[str, TargetReader] = field(init=False)
    limiter: RateLimiter = field(init=False)
    cursors: CursorCodec = field(init=False)
    live: LiveCatalog = field(init=False)
    tools_version: int = field(default=0, init=False)
    """How many times the published tools changed since start (2026 listen streams compare it: gateway.mcp.listen)."""
    closing: bool = field(default=False, init=False)
    """Set once the process stops serving (close_streams): listen streams end instead of holding the shutdown."""
    _listeners: WeakSet[Listener] = field(default_factory=WeakSet, init=False)
    _change: anyio.Event | None = field(default=None, init=False)
    _background: TaskGroup | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.readers = {name: TargetReader(backend, name) for name, backend in self.backends.items()}
        self.limiter = RateLimiter(self.config, self.store)
        self.cursors = CursorCodec(self.keys)
        self.live = LiveCatalog(self.config, self.backends, self.readers, self._tools_changed, self.list_wait)

    def start(self, background: TaskGroup) -> None:
        """Load and watch the backends in ``background`` (open_gateway's), where list_changed is sent from too."""
        self._background = background
        self.live.start(background)

    def backend_for(self, tool: str) -> Backend:
        """The backend that serves a tool."""
        return self.backends[self.config.backend_of(tool)]

    def reader_for(self, tool: str) -> TargetReader:
        """The reads of the backend that serves a tool."""
        return self.readers[self.config.backend_of(tool)]

    async def lookup(self, name: str, *, fresh: bool = False) -> dict[str, Any]:
        """A lookup table from its own backend: read once and kept (the names an input enum lists), or with
        ``fresh`` read now (the numbers a plan states)."""
        reader = self.readers[self.config.lookup_backend(name)]
        return await reader.lookup(name, self.config.lookups[name], fresh=fresh)

    async def fresh_lookup(self, name: str) -> dict[str, Any]:
        """A lookup table as its backend has it now."""
        return await self.lookup(name, fresh=True)

    async def catalog(self) -> dict[str, PublishedTool]:
        """The tools published now (a backend never loaded yet is waited for, within its own timeouts)."""
        return await self.live.tools()

    async def settle(self) -> None:
        """Wait until every backend's first load has ended (up or down), at most STARTUP_SECONDS."""
        await self.live.settle(STARTUP_SECONDS)

    async def tool(self, name: str) -> PublishedTool:
        """One configured tool as published now; a ToolError when its backend (named) is down or it does not fit."""
        return await self.live.tool(name)

    def listen(self, session: Listener) -> None:
        """Send this session ``notifications/tools/list_changed`` whenever the published tools change."""
        self._listeners.add(session)

    async def tools_changed(self, seen: int) -> None:
        """Return once the published tools changed after ``tools_version`` was ``seen``, or the gateway closes."""
        while self.tools_version == seen and not self.closing:
            if self._change is None:
                self._change = anyio.Event()
            await self._change.wait()

    def close_streams(self) -> None:
        """The process stops serving: every listen stream ends (gracefully) rather than hold the shutdown open."""
        self.closing = True
        self._wake()

    def _wake(self) -> None:
        change, self._change = self._change, None
        if change is not None:
            change.set()

    def _tools_changed(self) -> None:
        self.tools_version += 1
        self._wake()
        if self._background is not None and self._listeners:
            self._background.start_soon(self._tell_listeners)

    async def _tell_listeners(self) -> None:
        for session in list(self._listeners):
            try:
                with anyio.fail_after(NOTIFY_SECONDS):
                    await session.send_tool_list_changed()
            except Exception as exc:  # a session that cannot hear it any more stops listening
                log.info("list_changed not delivered (%s); the session stops listening", type(exc).__name__)
                self._listeners.discard(session)

    @property
    def approvals_url(self) -> str | None:
        """The base of approval links: approvals.public_url, else the address this process serves at."""
        return self.config.approvals.public_url or self.served_at

    def cached_input_schema(self, name: str) -> dict[str, object] | None:
        """A tool's input schema as last built (used for 2026 header checks)."""
        tool = self.live.built.tools.get(name)
        return dict(tool.tool.input_schema) if tool is not None else None


async def load_catalog(
    config: GatewayConfig, readers: Mapping[str, TargetReader], backends: Mapping[str, Backend]
) -> Catalog:
    """Every tool built once, with input enums read from their lookups and pass-through tools from their backends'
    tool lists (``check``: one look, no watching). Every backend is read at once; one that fails takes only the
    tools that need it."""
    listings: dict[str, list[types.Tool]] = {}
    wanted = {need for name in config.tools for need in needs(config, name)}
    lookups: dict[str, dict[str, Any]] = {}
    failures: dict[str, ToolError] = {}

    async def read_lookup(name: str) -> None:
        try:
            lookups[name] = await readers[config.lookup_backend(name)].lookup(name, config.lookups[name])
        except ToolError as err:
            failures[f"lookups.{name}"] = err

    async def read_listing(backend: str) -> None:
        try:
            listings[backend] = await backends[backend].list_tools()
        except BackendUnavailable:
            failures[f"backends.{backend}"] = unreachable(backend)

    async with anyio.create_task_group() as group:
        for need in sorted(wanted):
            kind, _, name = need.partition(".")
            if kind == "lookups":
                group.start_soon(read_lookup, name)
            else:
                group.start_soon(read_listing, name)
    return build_catalog(config, lookups, listings, failures)


@asynccontextmanager
async def open_gateway(
    config: GatewayConfig,
    *,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
    opener: Opener | None = None,
    openers: Mapping[str, Opener] | None = None,
    serving: str | None = None,
    list_wait: float = LIST_WAIT,
) -> AsyncIterator[Gateway]:
    """Open the store, every backend's client and the audit stream; close them on exit. Changes no state.

    ``openers`` replace how a named backend's connection is opened (tests run backend servers in process);
    ``opener`` does so for the one backend of a single-backend config. ``serving`` (``serve`` alone) describes
    this process and takes the store for it before the backends start (Store.serve_from: a SQLite store another
    process serves raises StoreInUse). ``clock`` and ``sleep`` are the gateway's time: tests pass a clock they
    set and a sleep that moves it on at once, and a test that waits out a backend's listing a shorter
    ``list_wait``."""
    sections = config.backend_sections()
    if opener is not None:
        if len(sections) != 1:
            raise ValueError("opener= is for a config with one backend; pass openers= by name")
        openers = {name: opener for name in sections}
    metrics = Metrics()
    state_dir = config.gateway.state_path()
    chain_keys = ChainKeys(load_audit_keys(state_dir))
    store = TimedStore(open_store(config.gateway.store, chain_keys), metrics.store_seconds)
    notifier = Notifier(config.approvals.webhooks)
    try:
        if serving is not None:
            await store.serve_from(serving)
        async with AsyncExitStack() as stack:
            backends: dict[str, Backend] = {}
            for name, section in sections.items():
                client = McpBackend(
                    section,
                    observe=metrics.backend_observer(name),
                    opener=(openers or {}).get(name),
                    max_depth=config.limits.max_depth,
                    on_reachable=metrics.connection_observer(name),
                )
                backends[name] = await stack.enter_async_context(client)
            feed = await stack.enter_async_context(sinks.open_feed(config.audit_stream, metrics.audit_stream))
            background = await stack.enter_async_context(anyio.create_task_group())
            background.start_soon(notifier.run)
            sinks.attach(store, feed)
            keys = load_keys(state_dir)
            gw = Gateway(
                config, backends, store, keys, clock, metrics, notifier=notifier, sleep=sleep, list_wait=list_wait
            )
            gw.start(background)
            try:
                yield gw
            finally:
                with anyio.CancelScope(shield=True):
                    for report in gw.refusals.due():  # counts of repeated refusals not yet reported
                        await trail.append(store, report)
                background.cancel_scope.cancel()
    finally:
        await store.close()
