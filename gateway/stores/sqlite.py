"""The default store: one SQLite file in WAL mode that survives a restart.

Calls run on the event loop: each is a few indexed statements on a local file. ``synchronous=FULL``
makes a claim durable before the backend is called, so a crash never forgets an in-flight key.
Locks are per process: run one gateway per SQLite file (several replicas share Redis instead).
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from dataclasses import replace
from pathlib import Path
from typing import Any

from gateway.audit.chain import sealed
from gateway.records import TOMBSTONE_SECONDS, WRITE_WINDOWS, Approval, AuditEntry, Claim, Expired, KeyRecord, Plan
from gateway.stores.base import approval_from_json, approval_json, claim_refusal
from gateway.stores.buckets import LocalBuckets
from gateway.stores.locks import KeyedLocks

SCHEMA = """
CREATE TABLE IF NOT EXISTS plans (
    plan_id TEXT PRIMARY KEY, body TEXT NOT NULL, in_use_by TEXT, purge_at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS plans_purge ON plans (purge_at);
CREATE TABLE IF NOT EXISTS idempotency (
    caller TEXT NOT NULL, key TEXT NOT NULL, plan_id TEXT NOT NULL, target TEXT NOT NULL,
    state TEXT NOT NULL, result TEXT, purge_at REAL NOT NULL, tool TEXT, version_before TEXT,
    PRIMARY KEY (caller, key));
CREATE INDEX IF NOT EXISTS idempotency_purge ON idempotency (purge_at);
CREATE TABLE IF NOT EXISTS nonces (nonce TEXT PRIMARY KEY, purge_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS audit (id INTEGER PRIMARY KEY AUTOINCREMENT, entry TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS approvals (
    approval_id TEXT PRIMARY KEY, body TEXT NOT NULL, rev INTEGER NOT NULL, expires_at REAL NOT NULL,
    requested_at REAL NOT NULL, purge_at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS approvals_expiry ON approvals (expires_at);
CREATE TABLE IF NOT EXISTS writes (scope TEXT NOT NULL, at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS writes_scope ON writes (scope, at);
"""
ADDED_COLUMNS = {"idempotency": ("tool TEXT", "version_before TEXT")}
"""Columns added after the first release: a file made before them gets them at open."""
RECORD_COLUMNS = "plan_id, target, state, result, tool, version_before"


class SqliteStore:
    """Plans, keys, nonces and the audit in one SQLite file."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute("PRAGMA busy_timeout=5000")
        self._db.executescript(SCHEMA)
        for table, columns in ADDED_COLUMNS.items():
            present = {row[1] for row in self._db.execute(f"PRAGMA table_info({table})")}
            for column in columns:
                if column.split()[0] not in present:
                    self._db.execute(f"ALTER TABLE {table} ADD COLUMN {column}")
        self._locks = KeyedLocks()
        self._buckets = LocalBuckets()

    async def put_plan(self, plan: Plan, now: float) -> None:
        body = json.dumps(dataclasses.asdict(plan))
        with self._db:
            self._db.execute("DELETE FROM plans WHERE purge_at < ?", (now,))
            self._db.execute(
                "INSERT INTO plans (plan_id, body, in_use_by, purge_at) VALUES (?, ?, NULL, ?)",
                (plan.plan_id, body, plan.expires_at + TOMBSTONE_SECONDS),
            )

    async def get_plan(self, plan_id: str, now: float) -> Plan | Expired | None:
        row = self._db.execute("SELECT body, in_use_by FROM plans WHERE plan_id = ?", (plan_id,)).fetchone()
        if row is None:
            return None
        plan = Plan(**{**json.loads(row[0]), "in_use_by": row[1]})
        return Expired(plan.caller) if now >= plan.expires_at else plan

    async def get_record(self, caller: str, key: str) -> KeyRecord | None:
        row = self._db.execute(
            f"SELECT {RECORD_COLUMNS} FROM idempotency WHERE caller = ? AND key = ?", (caller, key)
        ).fetchone()
        return None if row is None else _record(caller, key, row)

    async def claim(self, record: KeyRecord, now: float, retention: float) -> Claim:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            self._db.execute("DELETE FROM idempotency WHERE purge_at < ? AND state != 'in_flight'", (now,))
            plan = await self.get_plan(record.plan_id, now)
            refusal = claim_refusal(await self.get_record(record.caller, record.key), plan)
            if refusal is not None:
                return refusal
            self._db.execute(
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
            self._db.execute("UPDATE plans SET in_use_by = ? WHERE plan_id = ?", (record.key, record.plan_id))
            self._db.execute("COMMIT")
            return Claim(claimed=True)
        finally:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")

    async def release(self, record: KeyRecord) -> None:
        with self._db:
            self._db.execute(
                "DELETE FROM idempotency WHERE caller = ? AND key = ? AND state = 'in_flight'",
                (record.caller, record.key),
            )
            self._db.execute(
                "UPDATE plans SET in_use_by = NULL WHERE plan_id = ? AND in_use_by = ?",
                (record.plan_id, record.key),
            )

    async def settle(self, record: KeyRecord) -> None:
        with self._db:
            self._db.execute(
                "UPDATE idempotency SET state = ?, result = ? WHERE caller = ? AND key = ?",
                (record.state, json.dumps(record.result), record.caller, record.key),
            )
            self._db.execute("DELETE FROM plans WHERE plan_id = ?", (record.plan_id,))

    async def consume_plan(self, plan_id: str) -> bool:
        with self._db:
            cursor = self._db.execute("DELETE FROM plans WHERE plan_id = ? AND in_use_by IS NULL", (plan_id,))
        return cursor.rowcount == 1

    async def use_nonce(self, nonce: str, now: float, ttl: float) -> bool:
        with self._db:
            self._db.execute("DELETE FROM nonces WHERE purge_at < ?", (now,))
            cursor = self._db.execute(
                "INSERT OR IGNORE INTO nonces (nonce, purge_at) VALUES (?, ?)", (nonce, now + ttl)
            )
        return cursor.rowcount == 1

    async def recover_in_flight(self) -> list[KeyRecord]:
        # One gateway process per SQLite file: anything in flight at start-up was left by a crash.
        rows = self._db.execute(
            f"SELECT caller, key, {RECORD_COLUMNS} FROM idempotency WHERE state = 'in_flight'"
        ).fetchall()
        records = [replace(_record(row[0], row[1], row[2:]), state="unknown") for row in rows]
        for record in records:
            await self.settle(record)
        return records

    async def take_token(self, bucket: str, per_second: float, burst: int, now: float) -> float:
        return self._buckets.take(bucket, per_second, burst, now)

    def lock(self, target: str) -> AbstractAsyncContextManager[None]:
        return self._locks.hold(target)

    async def append_audit(self, entry: AuditEntry) -> None:
        self._db.execute("BEGIN IMMEDIATE")  # the read of the last entry and the insert are one step
        try:
            row = self._db.execute("SELECT entry FROM audit ORDER BY id DESC LIMIT 1").fetchone()
            last = AuditEntry(**json.loads(row[0])) if row is not None else None
            stored = sealed(entry, last)
            self._db.execute("INSERT INTO audit (entry) VALUES (?)", (json.dumps(dataclasses.asdict(stored)),))
            self._db.execute("COMMIT")
        finally:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")

    async def audit_entries(self) -> AsyncIterator[AuditEntry]:
        for (body,) in self._db.execute("SELECT entry FROM audit ORDER BY id").fetchall():
            yield AuditEntry(**json.loads(body))

    async def count_write(self, scopes: list[str], now: float) -> None:
        with self._db:
            self._db.execute("DELETE FROM writes WHERE at <= ?", (now - WRITE_WINDOWS["day"],))
            self._db.executemany("INSERT INTO writes (scope, at) VALUES (?, ?)", [(scope, now) for scope in scopes])

    async def recent_writes(self, scopes: list[str], now: float) -> dict[str, dict[str, int]]:
        counts = {scope: dict.fromkeys(WRITE_WINDOWS, 0) for scope in scopes}
        for window, seconds in WRITE_WINDOWS.items():
            marks = ",".join("?" * len(scopes))
            rows = self._db.execute(
                f"SELECT scope, COUNT(*) FROM writes WHERE scope IN ({marks}) AND at > ? AND at <= ? GROUP BY scope",
                (*scopes, now - seconds, now),
            ).fetchall()
            for scope, count in rows:
                counts[scope][window] = count
        return counts

    async def put_approval(self, approval: Approval) -> Approval:
        with self._db:
            self._db.execute("DELETE FROM approvals WHERE purge_at < ?", (approval.requested_at,))
            self._db.execute(
                "INSERT OR IGNORE INTO approvals (approval_id, body, rev, expires_at, requested_at, purge_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (
                    approval.approval_id,
                    approval_json(approval),
                    approval.rev,
                    approval.expires_at,
                    approval.requested_at,
                    approval.expires_at + TOMBSTONE_SECONDS,
                ),
            )
        stored = await self.get_approval(approval.approval_id)
        assert stored is not None
        return stored

    async def get_approval(self, approval_id: str) -> Approval | None:
        row = self._db.execute("SELECT body FROM approvals WHERE approval_id = ?", (approval_id,)).fetchone()
        return approval_from_json(row[0]) if row is not None else None

    async def replace_approval(self, approval: Approval) -> bool:
        changed = replace(approval, rev=approval.rev + 1)
        with self._db:
            cursor = self._db.execute(
                "UPDATE approvals SET body = ?, rev = ? WHERE approval_id = ? AND rev = ?",
                (approval_json(changed), changed.rev, approval.approval_id, approval.rev),
            )
        return cursor.rowcount == 1

    async def open_approvals(self, now: float) -> list[Approval]:
        rows = self._db.execute(
            "SELECT body FROM approvals WHERE expires_at > ? ORDER BY requested_at DESC", (now,)
        ).fetchall()
        return [approval_from_json(body) for (body,) in rows]

    async def close(self) -> None:
        self._db.close()


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
