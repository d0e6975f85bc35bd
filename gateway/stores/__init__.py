"""State the write path keeps between calls: plans, idempotency records, nonces, locks, rate buckets, audit.

``open_store(url)`` picks the implementation: ``memory``, ``sqlite:PATH`` or ``redis://…`` (shared by replicas).
Each is imported only when configured, so importing the interface loads no database driver.
"""

from __future__ import annotations

from pathlib import Path

from gateway.stores.base import Store, StoreUnavailable

__all__ = ["Store", "StoreUnavailable", "open_store"]


def open_store(url: str) -> Store:
    """Open the store a config URL names."""
    if url == "memory":
        from gateway.stores.memory import MemoryStore

        return MemoryStore()
    if url.startswith("sqlite:"):
        from gateway.stores.sqlite import SqliteStore

        return SqliteStore(Path(url.removeprefix("sqlite:")))
    if url.startswith(("redis://", "rediss://", "unix://")):
        from gateway.stores.redis import RedisStore

        return RedisStore(url)
    raise ValueError(f"gateway.store: unsupported store URL {url!r} (use 'memory', 'sqlite:PATH' or 'redis://…')")
