"""The SQLite store's counters: rate-limit buckets held in this process (one process serves the file, so taking a
token never leaves the event loop) and the ``writes`` table, one row per counted write with the rows it touched,
purged after a day."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from gateway.audit.chain import ChainKeys
from gateway.records import WRITE_WINDOWS
from gateway.stores.buckets import LocalBuckets
from gateway.stores.sqlite.file import SqliteFile, transaction


class SqliteCounters(SqliteFile):
    """The Counters role (gateway.stores.base)."""

    def __init__(self, path: Path, keys: ChainKeys | None = None) -> None:
        super().__init__(path, keys)
        self._buckets = LocalBuckets()

    async def take_token(self, bucket: str, per_second: float, burst: int, now: float) -> float:
        return self._buckets.take(bucket, per_second, burst, now)

    async def count_write(self, scopes: list[str], now: float, rows: int = 0) -> None:
        await self._write(_count_write, scopes, now, rows)

    async def recent_writes(self, scopes: list[str], now: float, rows: bool = False) -> dict[str, dict[str, int]]:
        return await self._read(_recent_writes, scopes, now, rows)


def _count_write(db: sqlite3.Connection, scopes: list[str], now: float, rows: int) -> None:
    def steps(db: sqlite3.Connection) -> None:
        db.execute("DELETE FROM writes WHERE at <= ?", (now - WRITE_WINDOWS["day"],))
        db.executemany(
            "INSERT INTO writes (scope, at, rows) VALUES (?, ?, ?)", [(scope, now, rows) for scope in scopes]
        )

    transaction(db, steps)


def _recent_writes(db: sqlite3.Connection, scopes: list[str], now: float, rows: bool) -> dict[str, dict[str, int]]:
    counts = {scope: dict.fromkeys(WRITE_WINDOWS, 0) for scope in scopes}
    marks = ",".join("?" * len(scopes))
    measure = "SUM(rows)" if rows else "COUNT(*)"
    for window, seconds in WRITE_WINDOWS.items():
        found = db.execute(
            f"SELECT scope, {measure} FROM writes WHERE scope IN ({marks}) AND at > ? AND at <= ? GROUP BY scope",
            (*scopes, now - seconds, now),
        ).fetchall()
        for scope, count in found:
            counts[scope][window] = int(count)
    return counts
