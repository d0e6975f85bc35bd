"""The SQLite store's passkeys: the ``passkeys`` table, one row per credential id, kept until deleted by hand (a
revoked one too: old signatures stay checkable). A replace stores a passkey only over the revision it was read
at."""

from __future__ import annotations

import sqlite3
from dataclasses import replace

from gateway.records import Passkey
from gateway.stores import codec
from gateway.stores.sqlite.file import SqliteFile, transaction


class SqlitePasskeys(SqliteFile):
    """The Passkeys role (gateway.stores.base)."""

    async def put_passkey(self, passkey: Passkey) -> bool:
        return await self._write(_put_passkey, passkey)

    async def get_passkey(self, credential_id: str) -> Passkey | None:
        return await self._read(_get_passkey, credential_id)

    async def replace_passkey(self, passkey: Passkey) -> bool:
        return await self._write(_replace_passkey, passkey)

    async def passkeys(self) -> list[Passkey]:
        return await self._read(_passkeys)


def _put_passkey(db: sqlite3.Connection, passkey: Passkey) -> bool:
    def steps(db: sqlite3.Connection) -> bool:
        inserted = db.execute(
            "INSERT OR IGNORE INTO passkeys (credential_id, body, rev, created_at) VALUES (?, ?, ?, ?)",
            (passkey.credential_id, codec.dump(passkey), passkey.rev, passkey.created_at),
        )
        return inserted.rowcount == 1

    return transaction(db, steps)


def _get_passkey(db: sqlite3.Connection, credential_id: str) -> Passkey | None:
    row = db.execute("SELECT body FROM passkeys WHERE credential_id = ?", (credential_id,)).fetchone()
    return codec.load(Passkey, row[0]) if row is not None else None


def _replace_passkey(db: sqlite3.Connection, passkey: Passkey) -> bool:
    changed = replace(passkey, rev=passkey.rev + 1)

    def steps(db: sqlite3.Connection) -> bool:
        updated = db.execute(
            "UPDATE passkeys SET body = ?, rev = ? WHERE credential_id = ? AND rev = ?",
            (codec.dump(changed), changed.rev, passkey.credential_id, passkey.rev),
        )
        return updated.rowcount == 1

    return transaction(db, steps)


def _passkeys(db: sqlite3.Connection) -> list[Passkey]:
    rows = db.execute("SELECT body FROM passkeys ORDER BY created_at DESC, credential_id").fetchall()
    return [codec.load(Passkey, body) for (body,) in rows]
