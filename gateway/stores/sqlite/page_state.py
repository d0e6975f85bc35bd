"""The SQLite store's page state: ``approvals`` (the approval page's writes waiting), ``tasks`` (MCP tasks) and
``sessions`` (approvers signed in on the page), each purged once expired. A replace stores a record only over the
revision it was read at; a task's, only from a status TASK_TRANSITIONS lets the new one follow
(gateway.stores.base.task_moves), read in the same transaction."""

from __future__ import annotations

import sqlite3
from dataclasses import replace

from gateway.records import TERMINAL, TOMBSTONE_SECONDS, Approval, ApproverSession, Task
from gateway.stores import codec
from gateway.stores.base import task_moves
from gateway.stores.sqlite.file import SqliteFile, transaction

_TERMINAL = tuple(sorted(TERMINAL))
_NOT_TERMINAL = f"status NOT IN ({', '.join('?' for _ in _TERMINAL)})"


class SqlitePageState(SqliteFile):
    """The Approvals, Tasks and ApproverSessions roles (gateway.stores.base)."""

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

    return transaction(db, steps)


def _get_approval(db: sqlite3.Connection, approval_id: str) -> Approval | None:
    row = db.execute("SELECT body FROM approvals WHERE approval_id = ?", (approval_id,)).fetchone()
    return codec.load(Approval, row[0]) if row is not None else None


def _replace_approval(db: sqlite3.Connection, approval: Approval) -> bool:
    return transaction(db, _replace_at_rev, "approvals", "approval_id", approval.approval_id, approval)


def _open_approvals(db: sqlite3.Connection, now: float) -> list[Approval]:
    rows = db.execute("SELECT body FROM approvals WHERE expires_at > ? ORDER BY requested_at DESC", (now,)).fetchall()
    return [codec.load(Approval, body) for (body,) in rows]


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

    return transaction(db, steps)


def _get_task(db: sqlite3.Connection, task_id: str) -> Task | None:
    row = db.execute("SELECT body FROM tasks WHERE task_id = ?", (task_id,)).fetchone()
    return codec.load(Task, row[0]) if row is not None else None


def _replace_task(db: sqlite3.Connection, task: Task) -> bool:
    def steps(db: sqlite3.Connection) -> bool:
        row = db.execute("SELECT status FROM tasks WHERE task_id = ?", (task.task_id,)).fetchone()
        if not task_moves(row[0] if row is not None else None, task.status):
            return False
        return _replace_at_rev(db, "tasks", "task_id", task.task_id, task, status=task.status)

    return transaction(db, steps)


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

    transaction(db, steps)


def _get_session(db: sqlite3.Connection, session_id: str, now: float) -> ApproverSession | None:
    row = db.execute("SELECT body FROM sessions WHERE session_id = ? AND expires_at > ?", (session_id, now)).fetchone()
    return codec.load(ApproverSession, row[0]) if row is not None else None


def _delete_session(db: sqlite3.Connection, session_id: str) -> bool:
    def steps(db: sqlite3.Connection) -> bool:
        return db.execute("DELETE FROM sessions WHERE session_id = ?", (session_id,)).rowcount == 1

    return transaction(db, steps)


def _sessions(db: sqlite3.Connection, now: float) -> list[ApproverSession]:
    rows = db.execute("SELECT body FROM sessions WHERE expires_at > ? ORDER BY created_at DESC", (now,)).fetchall()
    return [codec.load(ApproverSession, body) for (body,) in rows]
