"""State the write path keeps between calls: plans, idempotency records, nonces, locks, audit.

``open_store(url)`` picks the implementation: ``memory``, ``sqlite:PATH`` or ``redis://…`` (shared by replicas).
"""

from __future__ import annotations

from pathlib import Path

from gateway.stores.base import AuditEntry, Claim, Expired, KeyRecord, Plan, Store, StoreUnavailable
from gateway.stores.memory import MemoryStore
from gateway.stores.sqlite import SqliteStore

__all__ = [
    "AuditEntry",
    "Claim",
    "Expired",
    "KeyRecord",
    "MemoryStore",
    "Plan",
    "SqliteStore",
    "Store",
    "StoreUnavailable",
    "open_store",
]


def open_store(url: str) -> Store:
    """Open the store a config URL names."""
    if url == "memory":
        return MemoryStore()
    if url.startswith("sqlite:"):
        return SqliteStore(Path(url.removeprefix("sqlite:")))
    if url.startswith(("redis://", "rediss://", "unix://")):
        from gateway.stores.redis import RedisStore  # imported only when configured

        return RedisStore(url)
    raise ValueError(f"gateway.store: unsupported store URL {url!r} (use 'memory', 'sqlite:PATH' or 'redis://…')")
