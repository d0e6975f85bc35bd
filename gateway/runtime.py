"""The running gateway's parts in one object: config, backend, store, keys, clock, and the tool catalog.

``open_gateway`` opens them and changes nothing: start-up recovery (gateway.audit.trail.recover) is a step of
``serve`` alone, so ``check``, ``audit`` and the tests never settle another process's keys.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import anyio

from gateway.audit import sinks, trail
from gateway.audit.chain import ChainKeys
from gateway.audit.floods import RefusalCounter
from gateway.backend import Backend
from gateway.backend.client import McpBackend, Opener
from gateway.backend.reads import TargetReader
from gateway.catalog import PublishedTool, build_catalog
from gateway.config import GatewayConfig, PreviewTool
from gateway.cursor import CursorCodec
from gateway.keys import load_audit_keys, load_keys
from gateway.metrics import Metrics
from gateway.ratelimit import RateLimiter
from gateway.stores import Store, open_store
from gateway.stores.timed import TimedStore
from gateway.stores.unsettled import Unsettled
from gateway.webhooks import Notifier


@dataclass
class Gateway:
    """Everything a request handler needs. Built once per process and shared by every connection."""

    config: GatewayConfig
    backend: Backend
    store: Store
    keys: list[bytes]
    clock: Callable[[], float] = time.time
    metrics: Metrics = field(default_factory=Metrics)
    unsettled: Unsettled = field(default_factory=Unsettled)
    refusals: RefusalCounter = field(default_factory=RefusalCounter)
    notifier: Notifier | None = None
    """Delivers approval webhooks in the background (started by open_gateway)."""
    served_at: str | None = None
    """The base URL this process serves HTTP at (set by ``serve``), for approval links when none is configured."""
    reader: TargetReader = field(init=False)
    limiter: RateLimiter = field(init=False)
    cursors: CursorCodec = field(init=False)
    _catalog: dict[str, PublishedTool] | None = field(default=None, init=False)
    _catalog_lock: anyio.Lock = field(default_factory=anyio.Lock, init=False)

    def __post_init__(self) -> None:
        self.reader = TargetReader(self.backend)
        self.limiter = RateLimiter(self.config, self.store)
        self.cursors = CursorCodec(self.keys)

    async def catalog(self) -> dict[str, PublishedTool]:
        """The published tools; the first call reads the lookups that input enums come from."""
        if self._catalog is not None:  # every call asks; only the first waits on the lock
            return self._catalog
        async with self._catalog_lock:
            if self._catalog is None:
                self._catalog = await load_catalog(self.config, self.reader)
            return self._catalog

    @property
    def approvals_url(self) -> str | None:
        """The base of approval links: approvals.public_url, else the address this process serves at."""
        return self.config.approvals.public_url or self.served_at

    def cached_input_schema(self, name: str) -> dict[str, object] | None:
        """A tool's input schema when the catalog is loaded (used for 2026 header checks)."""
        tool = (self._catalog or {}).get(name)
        return dict(tool.tool.input_schema) if tool is not None else None


async def load_catalog(config: GatewayConfig, reader: TargetReader) -> dict[str, PublishedTool]:
    """The published tools, with input enums read from their lookups."""
    names = {
        field.enum_from
        for tool in config.tools.values()
        if isinstance(tool, PreviewTool)
        for field in tool.inputs.values()
        if field.enum_from is not None
    }
    lookups = {name: await reader.lookup(name, config.lookups[name]) for name in sorted(names)}
    return build_catalog(config, lookups)


@asynccontextmanager
async def open_gateway(
    config: GatewayConfig,
    *,
    clock: Callable[[], float] = time.time,
    opener: Opener | None = None,
    serving: str | None = None,
) -> AsyncIterator[Gateway]:
    """Open the store, the backend client and the audit stream; close them on exit. Changes no state.

    ``opener`` replaces how the backend connection is opened (tests run the legacy server in process).
    ``serving`` (``serve`` alone) describes this process and takes the store for it before the backend starts
    (Store.serve_from: a SQLite store another process serves raises StoreInUse)."""
    metrics = Metrics()
    state_dir = config.gateway.state_path()
    chain_keys = ChainKeys(load_audit_keys(state_dir))
    store = TimedStore(open_store(config.gateway.store, chain_keys), metrics.store_seconds)
    notifier = Notifier(config.approvals.webhooks)
    try:
        if serving is not None:
            await store.serve_from(serving)
        async with (
            McpBackend(
                config.backend, observe=metrics.observe_backend, opener=opener, max_depth=config.limits.max_depth
            ) as backend,
            sinks.open_feed(config.audit_stream, metrics.audit_stream) as feed,
            anyio.create_task_group() as background,
        ):
            background.start_soon(notifier.run)
            sinks.attach(store, feed)
            gw = Gateway(config, backend, store, load_keys(state_dir), clock, metrics, notifier=notifier)
            try:
                yield gw
            finally:
                with anyio.CancelScope(shield=True):
                    for report in gw.refusals.due():  # counts of repeated refusals not yet reported
                        await trail.append(store, report)
                background.cancel_scope.cancel()
    finally:
        await store.close()
