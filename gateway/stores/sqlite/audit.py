"""The SQLite store's audit: the ``audit`` table, one hash chain in append order (gateway.audit.chain). An append
reads the tail and inserts the sealed entry in one transaction; a trim deletes a prefix and appends its checkpoint
in one. ``append_in`` is the append inside another step's transaction (a settle's: gateway.stores.sqlite.keys)."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator

from gateway.audit.chain import ChainKeys, checkpoint, sealed
from gateway.records import AuditEntry
from gateway.stores import codec
from gateway.stores.sqlite.file import SqliteFile, transaction


class SqliteAudit(SqliteFile):
    """The AuditLog role (gateway.stores.base)."""

    async def append_audit(self, entry: AuditEntry) -> AuditEntry:
        return await self._write(_append, entry, self._keys)

    async def trim_audit(self, before: float, now: float) -> AuditEntry | None:
        return await self._write(_trim, before, now, self._keys)

    async def audit_entries(self) -> AsyncIterator[AuditEntry]:
        for body in await self._read(_audit_bodies):
            yield codec.load(AuditEntry, body)


def append_in(db: sqlite3.Connection, entry: AuditEntry, keys: ChainKeys) -> AuditEntry:
    """Seal ``entry`` after the chain's tail and insert it, inside the caller's transaction."""
    stored = sealed(entry, _tail(db), keys)
    db.execute("INSERT INTO audit (entry) VALUES (?)", (codec.dump(stored),))
    return stored


def _append(db: sqlite3.Connection, entry: AuditEntry, keys: ChainKeys) -> AuditEntry:
    return transaction(db, append_in, entry, keys)


def _tail(db: sqlite3.Connection) -> AuditEntry | None:
    row = db.execute("SELECT entry FROM audit ORDER BY id DESC LIMIT 1").fetchone()
    return codec.load(AuditEntry, row[0]) if row is not None else None


def _trim(db: sqlite3.Connection, before: float, now: float, keys: ChainKeys) -> AuditEntry | None:
    def steps(db: sqlite3.Connection) -> AuditEntry | None:
        # The oldest entries up to the first one at or after ``before``: a prefix, so the rest stays one chain.
        cut = db.execute(
            "SELECT COALESCE(MIN(id), (SELECT MAX(id) + 1 FROM audit)) FROM audit"
            " WHERE json_extract(entry, '$.at') >= ?",
            (before,),
        ).fetchone()[0]
        last = db.execute("SELECT entry FROM audit WHERE id < ? ORDER BY id DESC LIMIT 1", (cut,)).fetchone()
        if cut is None or last is None:
            return None
        tail = _tail(db)  # the checkpoint chains after the newest entry, even when every entry is trimmed
        count = db.execute("DELETE FROM audit WHERE id < ?", (cut,)).rowcount
        stored = sealed(checkpoint(codec.load(AuditEntry, last[0]), count, before, now), tail, keys)
        db.execute("INSERT INTO audit (entry) VALUES (?)", (codec.dump(stored),))
        return stored

    return transaction(db, steps)


def _audit_bodies(db: sqlite3.Connection) -> list[str]:
    return [body for (body,) in db.execute("SELECT entry FROM audit ORDER BY id").fetchall()]
