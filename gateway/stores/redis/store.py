"""The Redis store as a gateway opens it: its role classes composed into one Store (gateway.stores.base), plus the
two steps a store takes as a whole: serving (nothing to take: replicas share it by design) and closing."""

from __future__ import annotations

from gateway.stores.redis.audit import RedisAudit
from gateway.stores.redis.counters import RedisCounters
from gateway.stores.redis.keys import RedisKeys
from gateway.stores.redis.page_state import RedisPageState
from gateway.stores.redis.passkeys import RedisPasskeys


class RedisStore(RedisKeys, RedisAudit, RedisCounters, RedisPageState, RedisPasskeys):
    """Every role in one Redis shared by every replica."""

    async def serve_from(self, holder: str) -> None:
        return None  # replicas share the store by design: locks, claims and recovery are fenced per key

    async def close(self) -> None:
        await self._disconnect()
