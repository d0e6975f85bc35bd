"""Rate limits: a token bucket per caller (all tools together, and opening HTTP sessions) and per caller and tool.

Buckets live in the store, so replicas sharing Redis or PostgreSQL share them; the memory and SQLite stores keep
them in the one gateway process they serve.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from gateway.config import GatewayConfig
from gateway.errors import Code, ToolError
from gateway.stores.base import Counters


class RateLimiter:
    """Refuses a call with ``rate_limited`` (and a retry hint) when one of the caller's buckets is empty."""

    def __init__(self, config: GatewayConfig, store: Counters, clock: Callable[[], float] = time.monotonic) -> None:
        self._config = config
        self._store = store
        self._clock = clock

    async def opening(self, caller: str) -> float:
        """Opening an HTTP session counts as a call: take a token from the caller's bucket for all tools.
        0 when taken, else the seconds until one is free."""
        limit = self._config.rate_limits.per_caller
        if limit is None:
            return 0.0
        return await self._store.take_token(f"{caller}\n*", limit.per_second, limit.burst, self._clock())

    async def check(self, caller: str, tool: str) -> None:
        """Take one token from every bucket that applies, or refuse."""
        limits = [("*", self._config.rate_limits.per_caller), (tool, self._config.tools[tool].rate_limit)]
        for scope, limit in limits:
            if limit is None:
                continue
            wait = await self._store.take_token(f"{caller}\n{scope}", limit.per_second, limit.burst, self._clock())
            if wait > 0:
                seconds = math.ceil(wait * 10) / 10
                raise ToolError(
                    Code.RATE_LIMITED,
                    f"Too many calls{'' if scope == '*' else ' to ' + tool}. Retry in {seconds} seconds.",
                    details={"retryAfterSeconds": seconds},
                )
