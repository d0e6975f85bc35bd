"""The PostgreSQL store as a gateway opens it: its role classes composed into one Store (gateway.stores.base), plus
the two steps a store takes as a whole: serving (nothing to take: replicas share it by design) and closing."""

from __future__ import annotations

from gateway.stores.postgres.audit import PostgresAudit
from gateway.stores.postgres.counters import PostgresCounters
from gateway.stores.postgres.keys import PostgresKeys
from gateway.stores.postgres.page_state import PostgresPageState
from gateway.stores.postgres.passkeys import PostgresPasskeys


class PostgresStore(PostgresKeys, PostgresAudit, PostgresCounters, PostgresPageState, PostgresPasskeys):
    """Every role of the store in one PostgreSQL schema shared by every replica."""

    async def serve_from(self, holder: str) -> None:
        return None  # replicas share the store by design: locks, claims and recovery are fenced per key

    async def close(self) -> None:
        if self._opened:
            await self._pool.close()
            self._opened = False
