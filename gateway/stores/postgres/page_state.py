"""The PostgreSQL store's page state: ``approvals``, ``tasks`` and ``approver_sessions``, each kept until it expires.
An approval or a task is replaced only at the revision read, in one statement; a task's only from a status
TASK_TRANSITIONS lets the new one follow (``task_leaves``), in that same statement. ``create_task`` takes a
transaction-scoped advisory lock on the caller's key, so two replicas never make two tasks for one key."""

from __future__ import annotations

from dataclasses import replace

from gateway.records import TERMINAL, TOMBSTONE_SECONDS, Approval, ApproverSession, Task
from gateway.stores import codec
from gateway.stores.base import task_leaves
from gateway.stores.postgres.pool import Conn, PostgresPool


class PostgresPageState(PostgresPool):
    """The Approvals, Tasks and ApproverSessions roles (gateway.stores.base)."""

    async def put_approval(self, approval: Approval) -> Approval:
        async def steps(conn: Conn) -> Approval:
            await conn.execute("DELETE FROM approvals WHERE purge_at < %s", [approval.requested_at])
            await conn.execute(
                "INSERT INTO approvals (approval_id, plan_id, caller, tool, target, body, rev, requested_at,"
                " expires_at, purge_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
                " ON CONFLICT (approval_id) DO NOTHING",
                [
                    approval.approval_id,
                    approval.plan_id,
                    approval.caller,
                    approval.tool,
                    approval.target,
                    codec.dump(approval),
                    approval.rev,
                    approval.requested_at,
                    approval.expires_at,
                    approval.expires_at + TOMBSTONE_SECONDS,
                ],
            )
            row = await (
                await conn.execute("SELECT body FROM approvals WHERE approval_id = %s", [approval.approval_id])
            ).fetchone()
            assert row is not None
            return codec.load(Approval, row[0])

        return await self._transaction(steps)

    async def get_approval(self, approval_id: str) -> Approval | None:
        row = await self._one("SELECT body FROM approvals WHERE approval_id = %s", [approval_id])
        return codec.load(Approval, row[0]) if row is not None else None

    async def replace_approval(self, approval: Approval) -> bool:
        changed = replace(approval, rev=approval.rev + 1)
        replaced = await self._count(
            "UPDATE approvals SET body = %s, rev = %s WHERE approval_id = %s AND rev = %s",
            [codec.dump(changed), changed.rev, approval.approval_id, approval.rev],
        )
        return replaced == 1

    async def open_approvals(self, now: float) -> list[Approval]:
        rows = await self._rows(
            "SELECT body FROM approvals WHERE expires_at > %s ORDER BY requested_at DESC, approval_id", [now]
        )
        return [codec.load(Approval, body) for (body,) in rows]

    async def create_task(self, task: Task) -> Task:
        async def steps(conn: Conn) -> Task:
            # One transaction per (caller, key) at a time, on every replica: the look and the insert are one step.
            await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [f"{task.caller}\n{task.key}"])
            await conn.execute("DELETE FROM tasks WHERE expires_at <= %s", [task.created_at])
            found = await (
                await conn.execute(
                    "SELECT body FROM tasks WHERE caller = %s AND key = %s AND status <> ALL(%s) AND expires_at > %s"
                    " ORDER BY created_at LIMIT 1",
                    [task.caller, task.key, sorted(TERMINAL), task.created_at],
                )
            ).fetchone()
            if found is not None:
                return codec.load(Task, found[0])
            await conn.execute(
                "INSERT INTO tasks (task_id, caller, key, tool, status, body, rev, created_at, expires_at)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                [
                    task.task_id,
                    task.caller,
                    task.key,
                    task.tool,
                    task.status,
                    codec.dump(task),
                    task.rev,
                    task.created_at,
                    task.expires_at,
                ],
            )
            return task

        return await self._transaction(steps)

    async def get_task(self, task_id: str) -> Task | None:
        row = await self._one("SELECT body FROM tasks WHERE task_id = %s", [task_id])
        return codec.load(Task, row[0]) if row is not None else None

    async def replace_task(self, task: Task) -> bool:
        # One statement: the revision read and a status the new one may follow (task_leaves), or nothing changes.
        changed = replace(task, rev=task.rev + 1)
        replaced = await self._count(
            "UPDATE tasks SET body = %s, rev = %s, status = %s WHERE task_id = %s AND rev = %s AND status = ANY(%s)",
            [codec.dump(changed), changed.rev, task.status, task.task_id, task.rev, task_leaves(task.status)],
        )
        return replaced == 1

    async def live_tasks(self, now: float) -> list[Task]:
        rows = await self._rows(
            "SELECT body FROM tasks WHERE status <> ALL(%s) AND expires_at > %s ORDER BY created_at",
            [sorted(TERMINAL), now],
        )
        return [codec.load(Task, body) for (body,) in rows]

    async def put_session(self, session: ApproverSession) -> None:
        async def steps(conn: Conn) -> None:
            await conn.execute("DELETE FROM approver_sessions WHERE expires_at <= %s", [session.created_at])
            await conn.execute(
                "INSERT INTO approver_sessions (session_id, person, body, created_at, expires_at)"
                " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (session_id) DO UPDATE SET body = EXCLUDED.body,"
                " person = EXCLUDED.person, created_at = EXCLUDED.created_at, expires_at = EXCLUDED.expires_at",
                [session.session_id, session.person, codec.dump(session), session.created_at, session.expires_at],
            )

        await self._transaction(steps)

    async def get_session(self, session_id: str, now: float) -> ApproverSession | None:
        row = await self._one(
            "SELECT body FROM approver_sessions WHERE session_id = %s AND expires_at > %s", [session_id, now]
        )
        return codec.load(ApproverSession, row[0]) if row is not None else None

    async def delete_session(self, session_id: str) -> bool:
        return await self._count("DELETE FROM approver_sessions WHERE session_id = %s", [session_id]) == 1

    async def sessions(self, now: float) -> list[ApproverSession]:
        rows = await self._rows(
            "SELECT body FROM approver_sessions WHERE expires_at > %s ORDER BY created_at DESC", [now]
        )
        return [codec.load(ApproverSession, body) for (body,) in rows]
