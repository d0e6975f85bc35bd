"""The SQLite file every role of the store shares: one connection that writes and one that reads, each used from a
worker thread at a time, and ``transaction``, the one ``BEGIN IMMEDIATE`` step each writing operation runs in."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from gateway.audit.chain import ChainKeys
from gateway.stores.serving import ServingLock
from gateway.stores.sqlite.schema import create_tables

T = TypeVar("T")


class SqliteFile:
    """One store file, opened: what each role class (gateway.stores.sqlite.keys, audit, ...) adds its operations to
    (a role with state of its own makes it in its ``__init__``). Each operation is one function run on a worker
    thread in one call, so a transaction never spans two."""

    def __init__(self, path: Path, keys: ChainKeys | None = None) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._writer = connect(path)
        create_tables(self._writer)
        self._reader = connect(path)
        self._writing = anyio.CapacityLimiter(1)
        self._reading = anyio.CapacityLimiter(1)
        self._keys = keys or ChainKeys.ephemeral()
        self._serving = ServingLock(path)

    async def _write(self, operation: Callable[..., T], *args: Any) -> T:
        return await anyio.to_thread.run_sync(operation, self._writer, *args, limiter=self._writing)

    async def _read(self, operation: Callable[..., T], *args: Any) -> T:
        return await anyio.to_thread.run_sync(operation, self._reader, *args, limiter=self._reading)


def connect(path: Path) -> sqlite3.Connection:
    """A connection in WAL mode whose every commit is an fsync, waiting up to 5 s for another's write lock."""
    # Used from worker threads, one at a time per connection (each store's limiter of 1).
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.execute("PRAGMA busy_timeout=5000")
    return db


def transaction(db: sqlite3.Connection, steps: Callable[..., T], *args: Any) -> T:
    """Run ``steps`` in one BEGIN IMMEDIATE transaction: committed if it returns, rolled back if it raises."""
    db.execute("BEGIN IMMEDIATE")
    try:
        result = steps(db, *args)
        db.execute("COMMIT")
        return result
    finally:
        if db.in_transaction:
            db.execute("ROLLBACK")
