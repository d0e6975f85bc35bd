"""Token buckets per caller (all tools together) and per caller and tool. In-process: each replica limits on
its own, so behind a load balancer a caller's effective limit is the per-replica limit times the replicas."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from cachetools import LRUCache

from gateway.config import GatewayConfig, RateLimit
from gateway.errors import ToolError


class Bucket:
    """Tokens refill continuously up to ``burst``; each call takes one."""

    def __init__(self, limit: RateLimit, now: float) -> None:
        self.limit = limit
        self.tokens = float(limit.burst)
        self.updated = now

    def take(self, now: float) -> float:
        """0 when a token was taken, else the seconds until one is free."""
        self.tokens = min(self.limit.burst, self.tokens + (now - self.updated) * self.limit.per_second)
        self.updated = now
        if self.tokens >= 1:
            self.tokens -= 1
            return 0.0
        return (1 - self.tokens) / self.limit.per_second


class RateLimiter:
    """Refuses a call with ``rate_limited`` (and a retry hint) when the caller's bucket is empty."""

    def __init__(self, config: GatewayConfig, clock: Callable[[], float] = time.monotonic) -> None:
        self._config = config
        self._clock = clock
        self._buckets: LRUCache[tuple[str, str], Bucket] = LRUCache(maxsize=config.rate_limits.max_buckets)

    def check(self, caller: str, tool: str) -> None:
        """Take one token from every bucket that applies, or refuse."""
        now = self._clock()
        limits = [("*", self._config.rate_limits.per_caller), (tool, self._config.tools[tool].rate_limit)]
        for scope, limit in limits:
            if limit is None:
                continue
            bucket = self._buckets.get((caller, scope))
            if bucket is None or bucket.limit != limit:
                bucket = self._buckets[(caller, scope)] = Bucket(limit, now)
            wait = bucket.take(now)
            if wait > 0:
                seconds = math.ceil(wait * 10) / 10
                raise ToolError(
                    "rate_limited",
                    f"Too many calls{'' if scope == '*' else ' to ' + tool}. Retry in {seconds} seconds.",
                    details={"retryAfterSeconds": seconds},
                )
