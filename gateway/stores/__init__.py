"""State the write path keeps between calls: plans, idempotency records, nonces, locks, rate buckets, the audit,
and the approval page's state: approvals, MCP tasks, approver sessions.

``open_store(url, keys)`` picks the implementation: ``memory``, ``sqlite:PATH``, or, shared by replicas,
``redis://…`` / ``redis+sentinel://…`` or ``postgresql://…``; ``keys`` seal its audit chain (gateway.audit.chain).
Each is imported only when configured, so importing the interface loads no database driver. The interface is
one small protocol per role (gateway/stores/base.py: plans, key records, nonces, locks, counters, audit log,
approvals, tasks, approver sessions); ``Store`` is all of them.

    base       the contract: one protocol per role, grouped in FAMILIES; the key and task tables' checks
    memory/    the in-memory store (tests, throwaway runs)
    sqlite/    the default store: one SQLite file, served by one process
    redis/     a store replicas share: one Redis primary
    postgres/  a store replicas share: one PostgreSQL schema, made by ``migrate``
    timed      a wrapper timing every operation into the metrics
    codec      the one text form of every record a store keeps
    locks      per-target locks inside one process (memory, SQLite)
    leases     per-target locks leased on a shared store's server, with fencing (Redis, PostgreSQL)
    buckets    rate-limit buckets inside one process (memory, SQLite)
    serving    one serving process per SQLite file

Each store is a package by role family (``base.FAMILIES``: keys, audit, counters, page_state), each family one
module whose class does that family's operations, composed into the store's class in its ``store`` module;
tests/unit/test_store_layout.py holds all four to that. Adding a role to every store: its protocol in ``base``,
its place in FAMILIES, and one module per store package (a new family) or a class's few methods (an old one).

Imported by the runtime, the write path, the rate limiter, the audit trail, the approvals and the CLI (``audit``,
``migrate``, ``check``, the sessions list); imports records, errors, the audit chain, crashpoints, the store-URL
checks of gateway.config and observability's tracing (``timed``), never the write path or anything above it.
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
        from gateway.stores.redis import loading_the_driver

        with loading_the_driver():
            from gateway.stores.redis.store import RedisStore

        return RedisStore(url, keys)
    if url.startswith(("postgresql://", "postgres://")):
        from gateway.stores.postgres.store import PostgresStore

        return PostgresStore(url, keys)
    raise ValueError(
        f"gateway.store: unsupported store URL {url!r} "
        "(use 'memory', 'sqlite:PATH', 'redis://…', 'redis+sentinel://…' or 'postgresql://…')"
    )
