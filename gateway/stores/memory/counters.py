"""The in-memory store's counters: rate-limit buckets and, per scope, the times (and rows) of the writes counted
in the last day."""

from __future__ import annotations

from gateway.audit.chain import ChainKeys
from gateway.records import WRITE_WINDOWS
from gateway.stores.buckets import LocalBuckets
from gateway.stores.memory.maps import MemoryMaps


class MemoryCounters(MemoryMaps):
    """The Counters role (gateway.stores.base)."""

    def __init__(self, keys: ChainKeys | None = None) -> None:
        super().__init__(keys)
        self._buckets = LocalBuckets()
        self._writes: dict[str, list[tuple[float, int]]] = {}

    async def take_token(self, bucket: str, per_second: float, burst: int, now: float) -> float:
        return self._buckets.take(bucket, per_second, burst, now)

    async def count_write(self, scopes: list[str], now: float, rows: int = 0) -> None:
        for scope in scopes:
            kept = [(at, n) for at, n in self._writes.get(scope, []) if at > now - WRITE_WINDOWS["day"]]
            self._writes[scope] = [*kept, (now, rows)]

    async def recent_writes(self, scopes: list[str], now: float, rows: bool = False) -> dict[str, dict[str, int]]:
        return {
            scope: {
                window: sum(n if rows else 1 for at, n in self._writes.get(scope, []) if now - seconds < at <= now)
                for window, seconds in WRITE_WINDOWS.items()
            }
            for scope in scopes
        }
