"""The SQLite store as a gateway opens it: its role classes composed into one Store (gateway.stores.base), plus
the two steps a store takes as a whole: serving (one process per file: gateway/stores/serving.py) and closing."""

from __future__ import annotations

import sqlite3

from gateway.stores.sqlite.audit import SqliteAudit
from gateway.stores.sqlite.counters import SqliteCounters
from gateway.stores.sqlite.keys import SqliteKeys
from gateway.stores.sqlite.page_state import SqlitePageState
from gateway.stores.sqlite.passkeys import SqlitePasskeys


class SqliteStore(SqliteKeys, SqliteAudit, SqliteCounters, SqlitePageState, SqlitePasskeys):
    """Every role in one SQLite file, reached from worker threads."""

    async def serve_from(self, holder: str) -> None:
        self._serving.acquire(holder)

    async def close(self) -> None:
        await self._write(sqlite3.Connection.close)
        await self._read(sqlite3.Connection.close)
        self._serving.release()
