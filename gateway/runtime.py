"""The running gateway's parts in one object: config, backends, store, keys, clock, and the tool catalog.

``open_gateway`` opens them and changes nothing: start-up recovery (gateway.audit.trail.recover) is a step of
``serve`` alone, so ``check``, ``audit`` and the tests never settle another process's keys.

Each configured backend has its own client and reader; a tool reaches the one that serves it
(``backend_for`` / ``reader_for``). The catalog is read from the backends lazily and kept once complete; while
a backend is down, its tools are left out (``unavailable`` says why) and the next call tries it again, answering
from the tools known so far while that try runs.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp_types as types

from gateway.approvals.notify import Notifier
from gateway.audit import sinks, trail
from gateway.audit.chain import ChainKeys
from gateway.audit.floods import RefusalCounter
from gateway.backend import Backend, BackendUnavailable
from gateway.backend.client import McpBackend, Opener
from gateway.backend.reads import TargetReader
from gateway.catalog.published import Catalog, PublishedTool, build_catalog, needs
from gateway.config import GatewayConfig
from gateway.cursor import CursorCodec
from gateway.errors import Code, ToolError
from gateway.identity.secrets import load_audit_keys, load_keys
from gateway.observability.metrics import Metrics
from gateway.ratelimit import RateLimiter
from gateway.stores import Store, open_store
from gateway.stores.timed import TimedStore
from gateway.write.outcome import Unsettled


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
    served_at: str | None = None
    """The base URL this process serves HTTP at (set by ``serve``), for approval links when none is configured."""
    readers: dict[str, TargetReader] = field(init=False)
    limiter: RateLimiter = field(init=False)
    cursors: CursorCodec = field(init=False)
    _catalog: Catalog | None = field(default=None, init=False)
    _listings: dict[str, list[types.Tool]] = field(default_factory=dict, init=False)
    _catalog_lock: anyio.Lock = field(default_factory=anyio.Lock, init=False)

    def __post_init__(self) -> None:
        self.readers = {name: TargetReader(backend) for name, backend in self.backends.items()}
        self.limiter = RateLimiter(self.config, self.store)
        self.cursors = CursorCodec(self.keys)

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

    async def catalog(self, *, retry: bool = True) -> dict[str, PublishedTool]:
        """The published tools; the first call reads what their schemas need from the backends. Later, while some
        tools are missing, a call with ``retry`` tries their backends again (``tools/list``, and a call of a
        missing tool); other calls answer from the tools known, never waiting on a backend that is down."""
        known = self._catalog
        if known is not None and (not known.unavailable or not retry or self._catalog_lock.locked()):
            return known.tools  # complete, or not asked to retry, or a retry is running: answer with what is known
        async with self._catalog_lock:
            if self._catalog is None or self._catalog.unavailable:
                self._catalog = await load_catalog(self.config, self.readers, self.backends, self._listings)
            return self._catalog.tools

    def unavailable(self, name: str) -> ToolError | None:
        """Why a configured tool is not published right now (its backend is down, or it does not fit), or None."""
        return (self._catalog.unavailable if self._catalog is not None else {}).get(name)

    @property
    def approvals_url(self) -> str | None:
        """The base of approval links: approvals.public_url, else the address this process serves at."""
        return self.config.approvals.public_url or self.served_at

    def cached_input_schema(self, name: str) -> dict[str, object] | None:
        """A tool's input schema when the catalog is loaded (used for 2026 header checks)."""
        tool = (self._catalog.tools if self._catalog is not None else {}).get(name)
        return dict(tool.tool.input_schema) if tool is not None else None


async def load_catalog(
    config: GatewayConfig,
    readers: Mapping[str, TargetReader],
    backends: Mapping[str, Backend],
    listings: dict[str, list[types.Tool]] | None = None,
) -> Catalog:
    """The published tools, with input enums read from their lookups and pass-through tools from their backends'
    tool lists (kept in ``listings`` once read). Every backend is read at once; one that fails takes only the
    tools that need it."""
    listings = {} if listings is None else listings
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
            failures[f"backends.{backend}"] = ToolError(
                Code.BACKEND_UNAVAILABLE, "The backend cannot be reached right now. Nothing was changed; retry later."
            )

    async with anyio.create_task_group() as group:
        for need in sorted(wanted):
            kind, _, name = need.partition(".")
            if kind == "lookups":
                group.start_soon(read_lookup, name)
            elif name not in listings:
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
) -> AsyncIterator[Gateway]:
    """Open the store, every backend's client and the audit stream; close them on exit. Changes no state.

    ``openers`` replace how a named backend's connection is opened (tests run backend servers in process);
    ``opener`` does so for the one backend of a single-backend config. ``serving`` (``serve`` alone) describes
    this process and takes the store for it before the backends start (Store.serve_from: a SQLite store another
    process serves raises StoreInUse). ``clock`` and ``sleep`` are the gateway's time: tests pass a clock they
    set and a sleep that moves it on at once."""
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
                )
                backends[name] = await stack.enter_async_context(client)
                metrics.track_connection(name, _connected(client))
            feed = await stack.enter_async_context(sinks.open_feed(config.audit_stream, metrics.audit_stream))
            background = await stack.enter_async_context(anyio.create_task_group())
            background.start_soon(notifier.run)
            sinks.attach(store, feed)
            gw = Gateway(config, backends, store, load_keys(state_dir), clock, metrics, notifier=notifier, sleep=sleep)
            try:
                yield gw
            finally:
                with anyio.CancelScope(shield=True):
                    for report in gw.refusals.due():  # counts of repeated refusals not yet reported
                        await trail.append(store, report)
                background.cancel_scope.cancel()
    finally:
        await store.close()


def _connected(client: McpBackend) -> Callable[[], bool]:
    return lambda: client.reachable
