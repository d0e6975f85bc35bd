"""State the write path keeps between calls: plans, idempotency records, nonces, locks, rate buckets, audit.

``open_store(url, keys)`` picks the implementation: ``memory``, ``sqlite:PATH``, or, shared by replicas,
``redis://…`` / ``redis+sentinel://…`` or ``postgresql://…``; ``keys`` seal its audit chain (gateway.audit.chain).
Each is imported only when configured, so importing the interface loads no database driver. The interface is
one small protocol per role (gateway/stores/base.py: plans, key records, nonces, locks, counters, audit log,
approvals, approver sessions); ``Store`` is all of them.
"""

from __future__ import annotations

from pathlib import Path

from gateway.audit.chain import ChainKeys
from gateway.stores.base import Store, StoreUnavailable

__all__ = ["Store", "StoreUnavailable", "open_store"]


def open_store(url: str, keys: ChainKeys | None = None) -> Store:
    """Open the store a config URL names; ``keys`` seal its audit chain (a random key for this process only when
    None: fine for tests and throwaway stores, but nothing it seals verifies anywhere else)."""
    if url == "memory":
        from gateway.stores.memory.store import MemoryStore

        return MemoryStore(keys)
    if url.startswith("sqlite:"):
        from gateway.stores.sqlite.store import SqliteStore

        return SqliteStore(Path(url.removeprefix("sqlite:")), keys)
    if url.startswith(("redis://", "rediss://", "unix://", "redis+sentinel://")):
        from gateway.stores.redis.store import RedisStore

        return RedisStore(url, keys)
    if url.startswith(("postgresql://", "postgres://")):
        from gateway.stores.postgres.store import PostgresStore

        return PostgresStore(url, keys)
    raise ValueError(
        f"gateway.store: unsupported store URL {url!r} "
        "(use 'memory', 'sqlite:PATH', 'redis://…', 'redis+sentinel://…' or 'postgresql://…')"
    )
