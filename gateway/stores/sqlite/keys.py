"""The SQLite store's keys: ``plans``, ``idempotency`` and ``nonces``, and the per-target locks (in this process:
one process serves the file). The claim, release and settle each read the key's stored state in their one
transaction and change it only as KEY_TRANSITIONS allows (gateway.stores.base.key_moves); the settle stores its
audit entry in that same transaction (gateway.stores.sqlite.audit.append_in), so both are on disk or neither is."""

from __future__ import annotations

import json
import sqlite3
from contextlib import AbstractAsyncContextManager
from dataclasses import replace
from pathlib import Path
from typing import Any

from gateway.audit.chain import ChainKeys
from gateway.crashpoints import crash_point
from gateway.records import TOMBSTONE_SECONDS, AuditEntry, Claim, Expired, KeyRecord, Plan
from gateway.stores import codec
from gateway.stores.base import claim_refusal, key_leaves, key_moves, settles
from gateway.stores.locks import KeyedLocks
from gateway.stores.sqlite.audit import append_in
from gateway.stores.sqlite.file import SqliteFile, transaction

RECORD_COLUMNS = "plan_id, target, state, result, tool, version_before"


class SqliteKeys(SqliteFile):
    """The Plans, KeyRecords, Nonces and Locks roles (gateway.stores.base)."""

    def __init__(self, path: Path, keys: ChainKeys | None = None) -> None:
        super().__init__(path, keys)
        self._locks = KeyedLocks()

    async def put_plan(self, plan: Plan, now: float) -> None:
        await self._write(_put_plan, plan, now)

    async def get_plan(self, plan_id: str, now: float) -> Plan | Expired | None:
        return await self._read(_get_plan, plan_id, now)

    async def consume_plan(self, plan_id: str) -> bool:
        return await self._write(_consume_plan, plan_id)

    async def get_record(self, caller: str, key: str) -> KeyRecord | None:
        return await self._read(_get_record, caller, key)

    async def claim(self, record: KeyRecord, now: float, retention: float) -> Claim:
        return await self._write(_claim, record, now, retention)

    async def release(self, record: KeyRecord) -> None:
        await self._write(_release, record)

    async def settle(self, record: KeyRecord, entry: AuditEntry | None = None) -> AuditEntry | None:
        return await self._write(_settle, record, entry, self._keys)

    async def recover_in_flight(self) -> list[KeyRecord]:
        # serve_from made this the one process serving the file: anything in flight was left by a crash.
        return await self._write(_recover)

    async def use_nonce(self, nonce: str, now: float, ttl: float) -> bool:
        return await self._write(_use_nonce, nonce, now, ttl)

    def lock(self, target: str) -> AbstractAsyncContextManager[None]:
        return self._locks.hold(target)


def _put_plan(db: sqlite3.Connection, plan: Plan, now: float) -> None:
    def steps(db: sqlite3.Connection) -> None:
        db.execute("DELETE FROM plans WHERE purge_at < ?", (now,))
        db.execute(
            "INSERT INTO plans (plan_id, body, in_use_by, purge_at) VALUES (?, ?, NULL, ?)",
            (plan.plan_id, codec.dump(plan), plan.expires_at + TOMBSTONE_SECONDS),
        )

    transaction(db, steps)


def _get_plan(db: sqlite3.Connection, plan_id: str, now: float) -> Plan | Expired | None:
    row = db.execute("SELECT body, in_use_by FROM plans WHERE plan_id = ?", (plan_id,)).fetchone()
    if row is None:
        return None
    plan = codec.load(Plan, row[0], in_use_by=row[1])
    return Expired(plan.caller) if now >= plan.expires_at else plan


def _consume_plan(db: sqlite3.Connection, plan_id: str) -> bool:
    def steps(db: sqlite3.Connection) -> bool:
        cursor = db.execute("DELETE FROM plans WHERE plan_id = ? AND in_use_by IS NULL", (plan_id,))
        return cursor.rowcount == 1

    return transaction(db, steps)


def _get_record(db: sqlite3.Connection, caller: str, key: str) -> KeyRecord | None:
    row = db.execute(f"SELECT {RECORD_COLUMNS} FROM idempotency WHERE caller = ? AND key = ?", (caller, key)).fetchone()
    return None if row is None else _record(caller, key, row)


def _claim(db: sqlite3.Connection, record: KeyRecord, now: float, retention: float) -> Claim:
    def steps(db: sqlite3.Connection) -> Claim:
        db.execute("DELETE FROM idempotency WHERE purge_at < ? AND state != 'in_flight'", (now,))
        plan = _get_plan(db, record.plan_id, now)
        refusal = claim_refusal(_get_record(db, record.caller, record.key), plan)
        if refusal is not None:
            return refusal
        db.execute(
            "INSERT INTO idempotency (caller, key, plan_id, target, state, result, purge_at, tool, version_before)"
            " VALUES (?, ?, ?, ?, 'in_flight', NULL, ?, ?, ?)",
            (
                record.caller,
                record.key,
                record.plan_id,
                record.target,
                now + retention,
                record.tool,
                json.dumps(record.version_before),
            ),
        )
        db.execute("UPDATE plans SET in_use_by = ? WHERE plan_id = ?", (record.key, record.plan_id))
        return Claim(claimed=True)

    return transaction(db, steps)


def _release(db: sqlite3.Connection, record: KeyRecord) -> None:
    def steps(db: sqlite3.Connection) -> None:
        if key_moves(_get_record(db, record.caller, record.key), "release"):
            db.execute("DELETE FROM idempotency WHERE caller = ? AND key = ?", (record.caller, record.key))
        db.execute(
            "UPDATE plans SET in_use_by = NULL WHERE plan_id = ? AND in_use_by = ?", (record.plan_id, record.key)
        )

    transaction(db, steps)


def _settle(db: sqlite3.Connection, record: KeyRecord, entry: AuditEntry | None, keys: ChainKeys) -> AuditEntry | None:
    def steps(db: sqlite3.Connection) -> AuditEntry | None:
        stored = append_in(db, entry, keys) if entry is not None else None
        crash_point("mid-settle")  # the entry is written but not committed: a crash here loses both
        if settles(_get_record(db, record.caller, record.key), record):
            db.execute(
                "UPDATE idempotency SET state = ?, result = ? WHERE caller = ? AND key = ?",
                (record.state, json.dumps(record.result), record.caller, record.key),
            )
        db.execute("DELETE FROM plans WHERE plan_id = ?", (record.plan_id,))
        return stored

    return transaction(db, steps)


def _recover(db: sqlite3.Connection) -> list[KeyRecord]:
    def steps(db: sqlite3.Connection) -> list[KeyRecord]:
        left = key_leaves("unknown")  # what a crash leaves: the keys the table lets become unknown
        rows = db.execute(
            f"SELECT caller, key, {RECORD_COLUMNS} FROM idempotency WHERE state IN ({','.join('?' * len(left))})",
            left,
        )
        records = [replace(_record(row[0], row[1], row[2:]), state="unknown") for row in rows.fetchall()]
        for record in records:
            db.execute(
                "UPDATE idempotency SET state = 'unknown' WHERE caller = ? AND key = ?", (record.caller, record.key)
            )
            db.execute("DELETE FROM plans WHERE plan_id = ?", (record.plan_id,))
        return records

    return transaction(db, steps)


def _use_nonce(db: sqlite3.Connection, nonce: str, now: float, ttl: float) -> bool:
    def steps(db: sqlite3.Connection) -> bool:
        db.execute("DELETE FROM nonces WHERE purge_at < ?", (now,))
        cursor = db.execute("INSERT OR IGNORE INTO nonces (nonce, purge_at) VALUES (?, ?)", (nonce, now + ttl))
        return cursor.rowcount == 1

    return transaction(db, steps)


def _record(caller: str, key: str, row: tuple[Any, ...]) -> KeyRecord:
    """A KeyRecord from the RECORD_COLUMNS of its row."""
    plan_id, target, state, result, tool, version_before = row
    return KeyRecord(
        caller,
        key,
        plan_id=plan_id,
        target=target,
        state=state,
        result=json.loads(result) if result is not None else None,
        tool=tool,
        version_before=json.loads(version_before) if version_before is not None else None,
    )
