"""Token buckets held in this process (the memory and SQLite stores serve one gateway process)."""

from __future__ import annotations

from cachetools import LRUCache

MAX_BUCKETS = 100_000


class Bucket:
    """Tokens refill continuously up to ``burst``; each call takes one."""

    def __init__(self, per_second: float, burst: int, now: float) -> None:
        self.per_second = per_second
        self.burst = burst
        self.tokens = float(burst)
        self.updated = now

    def take(self, now: float) -> float:
        """0 when a token was taken, else the seconds until one is free."""
        self.tokens = min(self.burst, self.tokens + max(0.0, now - self.updated) * self.per_second)
        self.updated = now
        if self.tokens >= 1:
            self.tokens -= 1
            return 0.0
        return (1 - self.tokens) / self.per_second


class LocalBuckets:
    """Buckets by name, the least recently used forgotten past ``MAX_BUCKETS``."""

    def __init__(self) -> None:
        self._buckets: LRUCache[str, Bucket] = LRUCache(maxsize=MAX_BUCKETS)

    def take(self, name: str, per_second: float, burst: int, now: float) -> float:
        """Take a token from the named bucket (created full); 0, or the seconds to wait."""
        bucket = self._buckets.get(name)
        if bucket is None or (bucket.per_second, bucket.burst) != (per_second, burst):
            bucket = self._buckets[name] = Bucket(per_second, burst, now)
        return bucket.take(now)
