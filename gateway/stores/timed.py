"""A store wrapper that times every operation into the gateway's metrics, each in a trace span of its own."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable
from contextlib import AbstractAsyncContextManager
from typing import TypeVar

from prometheus_client import Histogram

from gateway.observability.tracing import span
from gateway.records import Approval, AuditEntry, Claim, Expired, KeyRecord, Plan
from gateway.stores.base import Store

T = TypeVar("T")


class TimedStore:
    """Delegates to ``inner``, observing each call's duration under its operation name."""

    def __init__(self, inner: Store, seconds: Histogram) -> None:
        self.inner = inner
        self._seconds = seconds

    async def _timed(self, operation: str, call: Awaitable[T]) -> T:
        started = time.perf_counter()
        try:
            with span(f"store {operation}"):
                return await call
        finally:
            self._seconds.labels(operation).observe(time.perf_counter() - started)

    async def put_plan(self, plan: Plan, now: float) -> None:
        await self._timed("put_plan", self.inner.put_plan(plan, now))

    async def get_plan(self, plan_id: str, now: float) -> Plan | Expired | None:
        return await self._timed("get_plan", self.inner.get_plan(plan_id, now))

    async def get_record(self, caller: str, key: str) -> KeyRecord | None:
        return await self._timed("get_record", self.inner.get_record(caller, key))

    async def claim(self, record: KeyRecord, now: float, retention: float) -> Claim:
        return await self._timed("claim", self.inner.claim(record, now, retention))

    async def release(self, record: KeyRecord) -> None:
        await self._timed("release", self.inner.release(record))

    async def settle(self, record: KeyRecord, entry: AuditEntry | None = None) -> AuditEntry | None:
        return await self._timed("settle", self.inner.settle(record, entry))

    async def consume_plan(self, plan_id: str) -> bool:
        return await self._timed("consume_plan", self.inner.consume_plan(plan_id))

    async def use_nonce(self, nonce: str, now: float, ttl: float) -> bool:
        return await self._timed("use_nonce", self.inner.use_nonce(nonce, now, ttl))

    async def serve_from(self, holder: str) -> None:
        await self.inner.serve_from(holder)

    async def recover_in_flight(self) -> list[KeyRecord]:
        return await self.inner.recover_in_flight()

    async def take_token(self, bucket: str, per_second: float, burst: int, now: float) -> float:
        return await self._timed("take_token", self.inner.take_token(bucket, per_second, burst, now))

    def lock(self, target: str) -> AbstractAsyncContextManager[None]:
        return self.inner.lock(target)

    async def append_audit(self, entry: AuditEntry) -> AuditEntry:
        return await self._timed("append_audit", self.inner.append_audit(entry))

    async def trim_audit(self, before: float, now: float) -> AuditEntry | None:
        return await self.inner.trim_audit(before, now)

    def audit_entries(self) -> AsyncIterator[AuditEntry]:
        return self.inner.audit_entries()

    async def count_write(self, scopes: list[str], now: float) -> None:
        await self._timed("count_write", self.inner.count_write(scopes, now))

    async def recent_writes(self, scopes: list[str], now: float) -> dict[str, dict[str, int]]:
        return await self._timed("recent_writes", self.inner.recent_writes(scopes, now))

    async def put_approval(self, approval: Approval) -> Approval:
        return await self._timed("put_approval", self.inner.put_approval(approval))

    async def get_approval(self, approval_id: str) -> Approval | None:
        return await self._timed("get_approval", self.inner.get_approval(approval_id))

    async def replace_approval(self, approval: Approval) -> bool:
        return await self._timed("replace_approval", self.inner.replace_approval(approval))

    async def open_approvals(self, now: float) -> list[Approval]:
        return await self._timed("open_approvals", self.inner.open_approvals(now))

    async def close(self) -> None:
        await self.inner.close()
