"""The running gateway's parts in one object: config, backend, store, keys, clock, and the tool catalog."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio

from gateway.backend import Backend
from gateway.catalog import PublishedTool, build_catalog
from gateway.config import GatewayConfig, PreviewTool
from gateway.cursor import CursorCodec
from gateway.keys import load_keys
from gateway.metrics import Metrics
from gateway.ratelimit import RateLimiter
from gateway.stores import AuditEntry, Plan, Store, StoreUnavailable, open_store
from gateway.stores.timed import TimedStore
from gateway.targets import TargetReader

log = logging.getLogger(__name__)


@dataclass
class Gateway:
    """Everything a request handler needs. Built once per process and shared by every connection."""

    config: GatewayConfig
    backend: Backend
    store: Store
    keys: list[bytes]
    clock: Callable[[], float] = time.time
    metrics: Metrics = field(default_factory=Metrics)
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
                names = {
                    field.enum_from
                    for tool in self.config.tools.values()
                    if isinstance(tool, PreviewTool)
                    for field in tool.inputs.values()
                    if field.enum_from is not None
                }
                lookups = {name: await self.reader.lookup(name, self.config.lookups[name]) for name in sorted(names)}
                self._catalog = build_catalog(self.config, lookups)
            return self._catalog

    def cached_input_schema(self, name: str) -> dict[str, object] | None:
        """A tool's input schema when the catalog is loaded (used for 2026 header checks)."""
        tool = (self._catalog or {}).get(name)
        return dict(tool.tool.input_schema) if tool is not None else None


@asynccontextmanager
async def open_gateway(config: GatewayConfig, *, clock: Callable[[], float] = time.time) -> AsyncIterator[Gateway]:
    """Start the backend client and open the store; close both on exit."""
    metrics = Metrics()
    store = TimedStore(open_store(config.gateway.store), metrics.store_seconds)
    try:
        await _recover(store, config, clock())
        async with Backend(config.backend, observe=metrics.observe_backend) as backend:
            keys = load_keys(Path(config.gateway.state_dir))
            yield Gateway(config, backend, store, keys, clock, metrics)
    finally:
        await store.close()


async def _recover(store: Store, config: GatewayConfig, now: float) -> None:
    """Keys a crash left in flight now read outcome_unknown, and each gets the audit entry its call never wrote:
    the write may have reached the backend."""
    writes = config.write_tools()
    for record in await store.recover_in_flight():
        log.warning("key %s of %s was in flight at start-up: its outcome is unknown", record.key, record.caller)
        try:
            plan = await store.get_plan(record.plan_id, now)
        except StoreUnavailable:
            plan = None
        tool = plan.tool if isinstance(plan, Plan) else writes[0] if len(writes) == 1 else "(unknown)"
        entry = AuditEntry(
            at=now,
            caller=record.caller,
            tool=tool,
            outcome="unknown",
            code="outcome_unknown",
            plan_id=record.plan_id,
            idempotency_key=record.key,
            target=record.target,
            version_before=plan.version if isinstance(plan, Plan) else None,
            extra={"recovered": "in flight when the gateway stopped"},
        )
        try:
            await store.append_audit(entry)
        except StoreUnavailable:
            log.error("audit entry not stored, the store is unreachable: %s", entry)
