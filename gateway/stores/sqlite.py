"""The default store: one SQLite file in WAL mode that survives a restart, served by one process at a time.

Tables, in one file (``journal_mode=WAL``, ``synchronous=FULL``)::

    plans        plan_id -> body, in_use_by (the key that claimed it), purge_at    expiry + the tombstone hour
    idempotency  (caller, key) -> plan_id, target, state, result, tool, version_before, purge_at
    nonces       nonce -> purge_at                       single use of a 2026 confirmation state within its TTL
    audit        id -> entry                             the chain (gateway.audit.chain), in append order
    approvals    approval_id -> body, rev, expires_at, requested_at, purge_at   the approval page's writes waiting
    writes       (scope, at), one row per write          blast-radius counters; rows older than a day purged
    tasks        task_id -> body, caller, key, status, rev, expires_at     MCP tasks; purged once expired
    sessions     session_id -> body, created_at, expires_at   approvers signed in on the page; purged once expired

Off the event loop. ``synchronous=FULL`` makes every commit an fsync, which must not stall every other request,
so SQLite runs in worker threads: one connection that writes, one that reads, each used by one thread at a time
(an ``anyio`` capacity limiter of 1 per connection). Each store operation is one function run there in one
call; a transaction never spans two. WAL lets the reader run beside a writer's fsync. Rate buckets and
per-target locks are in memory, so taking a token never leaves the loop.

Atomic (each one ``BEGIN IMMEDIATE`` transaction on the writer):

- ``claim``: purge lapsed keys, read the key and the plan, refuse (gateway.stores.base.claim_refusal) or insert
  the key in flight and mark the plan in use;
- ``settle`` with its audit entry: read the chain's tail, insert the sealed entry, record the outcome under the
  key, delete the plan: one commit, one fsync. The outcome and its entry are on disk together or not at all.
- ``consume_plan`` (a declined prompt): delete the plan only while no key has claimed it;
- ``append_audit`` and ``trim_audit``: the read of the tail and the insert (or the delete and the checkpoint);
- ``create_task``: look for a live task of the same (caller, key), else insert; ``replace_approval``: an update
  only at the revision read; ``replace_task``: the same, once the stored status was read and TASK_TRANSITIONS lets
  the new one follow it (gateway.stores.base.task_moves).

Each step that changes a key reads its stored state in the same transaction and changes it only as
KEY_TRANSITIONS (gateway.records) allows (gateway.stores.base.key_moves); anything else leaves the key as it was.

Fenced. One ``serve`` process per file (gateway/stores/serving.py holds an exclusive lock the kernel drops when
the process dies), so the per-target locks, which live in that process, order every write to a target, and
everything in flight at start-up was left by a crash. ``check`` and ``audit`` open the file too; they only
read, or write in a transaction of their own (``audit trim``).

Guaranteed. A claim is on disk before the backend is called. A crash before the settle's commit leaves the key
in flight with no outcome entry; the next ``serve`` settles it ``unknown`` and audits it (gateway.audit.trail),
so a write that may have reached the backend always has exactly one entry saying what is known.

How it fails. Another connection holding the write lock (``audit trim`` during a burst) is waited for up to
``busy_timeout`` (5 s); then, and on a full disk or an unreadable file, the operation raises
``sqlite3.Error`` and its transaction is rolled back, leaving the file as it was.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from gateway.audit.chain import ChainKeys, checkpoint, sealed
from gateway.crashpoints import crash_point
from gateway.records import (
    TERMINAL,
    TOMBSTONE_SECONDS,
    WRITE_WINDOWS,
    Approval,
    ApproverSession,
    AuditEntry,
    Claim,
    Expired,
    KeyRecord,
    Plan,
    Task,
)
from gateway.stores import codec
from gateway.stores.base import claim_refusal, key_leaves, key_moves, settles, task_moves
from gateway.stores.buckets import LocalBuckets
from gateway.stores.locks import KeyedLocks
from gateway.stores.serving import ServingLock

T = TypeVar("T")

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
CREATE TABLE IF NOT EXISTS sessions (
    session_id TEXT PRIMARY KEY, body TEXT NOT NULL, created_at REAL NOT NULL, expires_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS writes (scope TEXT NOT NULL, at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS writes_scope ON writes (scope, at);
CREATE TABLE IF NOT EXISTS tasks (
    task_id TEXT PRIMARY KEY, body TEXT NOT NULL, caller TEXT NOT NULL, key TEXT NOT NULL, status TEXT NOT NULL,
    rev INTEGER NOT NULL, created_at REAL NOT NULL, expires_at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS tasks_key ON tasks (caller, key);
CREATE INDEX IF NOT EXISTS tasks_live ON tasks (status, expires_at);
"""
ADDED_COLUMNS = {"idempotency": ("tool TEXT", "version_before TEXT")}
"""Columns added after the first release: a file made before them gets them at open."""
RECORD_COLUMNS = "plan_id, target, state, result, tool, version_before"


class SqliteStore:
    """Plans, keys, nonces and the audit in one SQLite file, reached from worker threads."""

    def __init__(self, path: Path, keys: ChainKeys | None = None) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._writer = _connect(path)
        self._writer.executescript(SCHEMA)
        for table, columns in ADDED_COLUMNS.items():
            present = {row[1] for row in self._writer.execute(f"PRAGMA table_info({table})")}
            for column in columns:
                if column.split()[0] not in present:
                    self._writer.execute(f"ALTER TABLE {table} ADD COLUMN {column}")
        self._reader = _connect(path)
        self._writing = anyio.CapacityLimiter(1)
        self._reading = anyio.CapacityLimiter(1)
        self._keys = keys or ChainKeys.ephemeral()
        self._locks = KeyedLocks()
        self._buckets = LocalBuckets()
        self._serving = ServingLock(path)

    async def _write(self, operation: Callable[..., T], *args: Any) -> T:
        return await anyio.to_thread.run_sync(operation, self._writer, *args, limiter=self._writing)

    async def _read(self, operation: Callable[..., T], *args: Any) -> T:
        return await anyio.to_thread.run_sync(operation, self._reader, *args, limiter=self._reading)

    async def put_plan(self, plan: Plan, now: float) -> None:
        await self._write(_put_plan, plan, now)

    async def get_plan(self, plan_id: str, now: float) -> Plan | Expired | None:
        return await self._read(_get_plan, plan_id, now)

    async def get_record(self, caller: str, key: str) -> KeyRecord | None:
        return await self._read(_get_record, caller, key)

    async def claim(self, record: KeyRecord, now: float, retention: float) -> Claim:
        return await self._write(_claim, record, now, retention)

    async def release(self, record: KeyRecord) -> None:
        await self._write(_release, record)

    async def settle(self, record: KeyRecord, entry: AuditEntry | None = None) -> AuditEntry | None:
        return await self._write(_settle, record, entry, self._keys)

    async def consume_plan(self, plan_id: str) -> bool:
        return await self._write(_consume_plan, plan_id)

    async def use_nonce(self, nonce: str, now: float, ttl: float) -> bool:
        return await self._write(_use_nonce, nonce, now, ttl)

    async def serve_from(self, holder: str) -> None:
        self._serving.acquire(holder)

    async def recover_in_flight(self) -> list[KeyRecord]:
        # serve_from made this the one process serving the file: anything in flight was left by a crash.
        return await self._write(_recover)

    async def take_token(self, bucket: str, per_second: float, burst: int, now: float) -> float:
        return self._buckets.take(bucket, per_second, burst, now)

    def lock(self, target: str) -> AbstractAsyncContextManager[None]:
        return self._locks.hold(target)

    async def append_audit(self, entry: AuditEntry) -> AuditEntry:
        return await self._write(_append, entry, self._keys)

    async def trim_audit(self, before: float, now: float) -> AuditEntry | None:
        return await self._write(_trim, before, now, self._keys)

    async def audit_entries(self) -> AsyncIterator[AuditEntry]:
        for body in await self._read(_audit_bodies):
            yield codec.load(AuditEntry, body)

    async def count_write(self, scopes: list[str], now: float) -> None:
        await self._write(_count_write, scopes, now)

    async def recent_writes(self, scopes: list[str], now: float) -> dict[str, dict[str, int]]:
        return await self._read(_recent_writes, scopes, now)

    async def put_approval(self, approval: Approval) -> Approval:
        return await self._write(_put_approval, approval)

    async def get_approval(self, approval_id: str) -> Approval | None:
        return await self._read(_get_approval, approval_id)

    async def replace_approval(self, approval: Approval) -> bool:
        return await self._write(_replace_approval, approval)

    async def open_approvals(self, now: float) -> list[Approval]:
        return await self._read(_open_approvals, now)

    async def create_task(self, task: Task) -> Task:
        return await self._write(_create_task, task)

    async def get_task(self, task_id: str) -> Task | None:
        return await self._read(_get_task, task_id)

    async def replace_task(self, task: Task) -> bool:
        return await self._write(_replace_task, task)

    async def live_tasks(self, now: float) -> list[Task]:
        return await self._read(_live_tasks, now)

    async def put_session(self, session: ApproverSession) -> None:
        await self._write(_put_session, session)

    async def get_session(self, session_id: str, now: float) -> ApproverSession | None:
        return await self._read(_get_session, session_id, now)

    async def delete_session(self, session_id: str) -> bool:
        return await self._write(_delete_session, session_id)

    async def sessions(self, now: float) -> list[ApproverSession]:
        return await self._read(_sessions, now)

    async def close(self) -> None:
        await self._write(sqlite3.Connection.close)
        await self._read(sqlite3.Connection.close)
        self._serving.release()


def _connect(path: Path) -> sqlite3.Connection:
    # Used from worker threads, one at a time per connection (each store's limiter of 1).
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.execute("PRAGMA busy_timeout=5000")
    return db


def _transaction(db: sqlite3.Connection, steps: Callable[..., T], *args: Any) -> T:
    """Run ``steps`` in one BEGIN IMMEDIATE transaction: committed if it returns, rolled back if it raises."""
    db.execute("BEGIN IMMEDIATE")
    try:
        result = steps(db, *args)
        db.execute("COMMIT")
        return result
    finally:
        if db.in_transaction:
            db.execute("ROLLBACK")


def _put_plan(db: sqlite3.Connection, plan: Plan, now: float) -> None:
    def steps(db: sqlite3.Connection) -> None:
        db.execute("DELETE FROM plans WHERE purge_at < ?", (now,))
        db.execute(
            "INSERT INTO plans (plan_id, body, in_use_by, purge_at) VALUES (?, ?, NULL, ?)",
            (plan.plan_id, codec.dump(plan), plan.expires_at + TOMBSTONE_SECONDS),
        )

    _transaction(db, steps)


def _get_plan(db: sqlite3.Connection, plan_id: str, now: float) -> Plan | Expired | None:
    row = db.execute("SELECT body, in_use_by FROM plans WHERE plan_id = ?", (plan_id,)).fetchone()
    if row is None:
        return None
    plan = codec.load(Plan, row[0], in_use_by=row[1])
    return Expired(plan.caller) if now >= plan.expires_at else plan


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

    return _transaction(db, steps)


def _release(db: sqlite3.Connection, record: KeyRecord) -> None:
    def steps(db: sqlite3.Connection) -> None:
        if key_moves(_get_record(db, record.caller, record.key), "release"):
            db.execute("DELETE FROM idempotency WHERE caller = ? AND key = ?", (record.caller, record.key))
        db.execute(
            "UPDATE plans SET in_use_by = NULL WHERE plan_id = ? AND in_use_by = ?", (record.plan_id, record.key)
        )

    _transaction(db, steps)


def _settle(db: sqlite3.Connection, record: KeyRecord, entry: AuditEntry | None, keys: ChainKeys) -> AuditEntry | None:
    def steps(db: sqlite3.Connection) -> AuditEntry | None:
        stored = _append_in(db, entry, keys) if entry is not None else None
        crash_point("mid-settle")  # the entry is written but not committed: a crash here loses both
        if settles(_get_record(db, record.caller, record.key), record):
            db.execute(
                "UPDATE idempotency SET state = ?, result = ? WHERE caller = ? AND key = ?",
                (record.state, json.dumps(record.result), record.caller, record.key),
            )
        db.execute("DELETE FROM plans WHERE plan_id = ?", (record.plan_id,))
        return stored

    return _transaction(db, steps)


def _consume_plan(db: sqlite3.Connection, plan_id: str) -> bool:
    def steps(db: sqlite3.Connection) -> bool:
        cursor = db.execute("DELETE FROM plans WHERE plan_id = ? AND in_use_by IS NULL", (plan_id,))
        return cursor.rowcount == 1

    return _transaction(db, steps)


def _use_nonce(db: sqlite3.Connection, nonce: str, now: float, ttl: float) -> bool:
    def steps(db: sqlite3.Connection) -> bool:
        db.execute("DELETE FROM nonces WHERE purge_at < ?", (now,))
        cursor = db.execute("INSERT OR IGNORE INTO nonces (nonce, purge_at) VALUES (?, ?)", (nonce, now + ttl))
        return cursor.rowcount == 1

    return _transaction(db, steps)


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

    return _transaction(db, steps)


def _append(db: sqlite3.Connection, entry: AuditEntry, keys: ChainKeys) -> AuditEntry:
    return _transaction(db, _append_in, entry, keys)


def _append_in(db: sqlite3.Connection, entry: AuditEntry, keys: ChainKeys) -> AuditEntry:
    """Seal ``entry`` after the chain's tail and insert it, inside the caller's transaction."""
    stored = sealed(entry, _tail(db), keys)
    db.execute("INSERT INTO audit (entry) VALUES (?)", (codec.dump(stored),))
    return stored


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

    return _transaction(db, steps)


def _audit_bodies(db: sqlite3.Connection) -> list[str]:
    return [body for (body,) in db.execute("SELECT entry FROM audit ORDER BY id").fetchall()]


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


def _count_write(db: sqlite3.Connection, scopes: list[str], now: float) -> None:
    def steps(db: sqlite3.Connection) -> None:
        db.execute("DELETE FROM writes WHERE at <= ?", (now - WRITE_WINDOWS["day"],))
        db.executemany("INSERT INTO writes (scope, at) VALUES (?, ?)", [(scope, now) for scope in scopes])

    _transaction(db, steps)


def _recent_writes(db: sqlite3.Connection, scopes: list[str], now: float) -> dict[str, dict[str, int]]:
    counts = {scope: dict.fromkeys(WRITE_WINDOWS, 0) for scope in scopes}
    marks = ",".join("?" * len(scopes))
    for window, seconds in WRITE_WINDOWS.items():
        rows = db.execute(
            f"SELECT scope, COUNT(*) FROM writes WHERE scope IN ({marks}) AND at > ? AND at <= ? GROUP BY scope",
            (*scopes, now - seconds, now),
        ).fetchall()
        for scope, count in rows:
            counts[scope][window] = count
    return counts


def _put_approval(db: sqlite3.Connection, approval: Approval) -> Approval:
    def steps(db: sqlite3.Connection) -> Approval:
        db.execute("DELETE FROM approvals WHERE purge_at < ?", (approval.requested_at,))
        db.execute(
            "INSERT OR IGNORE INTO approvals (approval_id, body, rev, expires_at, requested_at, purge_at)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (
                approval.approval_id,
                codec.dump(approval),
                approval.rev,
                approval.expires_at,
                approval.requested_at,
                approval.expires_at + TOMBSTONE_SECONDS,
            ),
        )
        stored = _get_approval(db, approval.approval_id)
        assert stored is not None
        return stored

    return _transaction(db, steps)


def _get_approval(db: sqlite3.Connection, approval_id: str) -> Approval | None:
    row = db.execute("SELECT body FROM approvals WHERE approval_id = ?", (approval_id,)).fetchone()
    return codec.load(Approval, row[0]) if row is not None else None


def _replace_approval(db: sqlite3.Connection, approval: Approval) -> bool:
    return _transaction(db, _replace_at_rev, "approvals", "approval_id", approval.approval_id, approval)


def _open_approvals(db: sqlite3.Connection, now: float) -> list[Approval]:
    rows = db.execute("SELECT body FROM approvals WHERE expires_at > ? ORDER BY requested_at DESC", (now,)).fetchall()
    return [codec.load(Approval, body) for (body,) in rows]


_TERMINAL = tuple(sorted(TERMINAL))
_NOT_TERMINAL = f"status NOT IN ({', '.join('?' for _ in _TERMINAL)})"


def _create_task(db: sqlite3.Connection, task: Task) -> Task:
    def steps(db: sqlite3.Connection) -> Task:
        db.execute("DELETE FROM tasks WHERE expires_at <= ?", (task.created_at,))
        row = db.execute(
            f"SELECT body FROM tasks WHERE caller = ? AND key = ? AND {_NOT_TERMINAL} AND expires_at > ?",
            (task.caller, task.key, *_TERMINAL, task.created_at),
        ).fetchone()
        if row is not None:
            return codec.load(Task, row[0])
        db.execute(
            "INSERT INTO tasks (task_id, body, caller, key, status, rev, created_at, expires_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                task.task_id,
                codec.dump(task),
                task.caller,
                task.key,
                task.status,
                task.rev,
                task.created_at,
                task.expires_at,
            ),
        )
        return task

    return _transaction(db, steps)


def _get_task(db: sqlite3.Connection, task_id: str) -> Task | None:
    row = db.execute("SELECT body FROM tasks WHERE task_id = ?", (task_id,)).fetchone()
    return codec.load(Task, row[0]) if row is not None else None


def _replace_task(db: sqlite3.Connection, task: Task) -> bool:
    def steps(db: sqlite3.Connection) -> bool:
        row = db.execute("SELECT status FROM tasks WHERE task_id = ?", (task.task_id,)).fetchone()
        if not task_moves(row[0] if row is not None else None, task.status):
            return False
        return _replace_at_rev(db, "tasks", "task_id", task.task_id, task, status=task.status)

    return _transaction(db, steps)


def _replace_at_rev(
    db: sqlite3.Connection, table: str, id_column: str, record_id: str, record: Approval | Task, **columns: str
) -> bool:
    """Store ``record`` with ``rev + 1`` (and the ``columns`` kept beside its body) if the stored one is still at
    ``record.rev``, inside the caller's transaction; the table and column names are this module's own, never a
    caller's."""
    changed = replace(record, rev=record.rev + 1)
    sets = "".join(f", {column} = ?" for column in columns)
    cursor = db.execute(
        f"UPDATE {table} SET body = ?, rev = ?{sets} WHERE {id_column} = ? AND rev = ?",
        (codec.dump(changed), changed.rev, *columns.values(), record_id, record.rev),
    )
    return cursor.rowcount == 1


def _live_tasks(db: sqlite3.Connection, now: float) -> list[Task]:
    rows = db.execute(
        f"SELECT body FROM tasks WHERE {_NOT_TERMINAL} AND expires_at > ? ORDER BY created_at", (*_TERMINAL, now)
    ).fetchall()
    return [codec.load(Task, row[0]) for row in rows]


def _put_session(db: sqlite3.Connection, session: ApproverSession) -> None:
    def steps(db: sqlite3.Connection) -> None:
        db.execute("DELETE FROM sessions WHERE expires_at <= ?", (session.created_at,))
        db.execute(
            "INSERT OR REPLACE INTO sessions (session_id, body, created_at, expires_at) VALUES (?, ?, ?, ?)",
            (session.session_id, codec.dump(session), session.created_at, session.expires_at),
        )

    _transaction(db, steps)


def _get_session(db: sqlite3.Connection, session_id: str, now: float) -> ApproverSession | None:
    row = db.execute("SELECT body FROM sessions WHERE session_id = ? AND expires_at > ?", (session_id, now)).fetchone()
    return codec.load(ApproverSession, row[0]) if row is not None else None


def _delete_session(db: sqlite3.Connection, session_id: str) -> bool:
    def steps(db: sqlite3.Connection) -> bool:
        return db.execute("DELETE FROM sessions WHERE session_id = ?", (session_id,)).rowcount == 1

    return _transaction(db, steps)


def _sessions(db: sqlite3.Connection, now: float) -> list[ApproverSession]:
    rows = db.execute("SELECT body FROM sessions WHERE expires_at > ? ORDER BY created_at DESC", (now,)).fetchall()
    return [codec.load(ApproverSession, body) for (body,) in rows]
