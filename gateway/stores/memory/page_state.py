"""The in-memory store's page state: approvals (kept an hour past their expiry), MCP tasks and approver sessions
(kept until they expire). A replace stores a record only over the revision it was read at; a task's, only from a
status TASK_TRANSITIONS lets the new one follow (gateway.stores.base.task_moves)."""

from __future__ import annotations

from dataclasses import replace
from typing import TypeVar

from cachetools import TLRUCache

from gateway.audit.chain import ChainKeys
from gateway.records import TOMBSTONE_SECONDS, Approval, ApproverSession, Task
from gateway.stores.base import task_moves
from gateway.stores.memory.maps import MemoryMaps, expiring

Revised = TypeVar("Revised", Approval, Task)


class MemoryPageState(MemoryMaps):
    """The Approvals, Tasks and ApproverSessions roles (gateway.stores.base)."""

    def __init__(self, keys: ChainKeys | None = None) -> None:
        super().__init__(keys)
        self._approvals: TLRUCache[str, tuple[Approval, float]] = expiring()
        self._tasks: TLRUCache[str, tuple[Task, float]] = expiring()
        self._sessions: TLRUCache[str, tuple[ApproverSession, float]] = expiring()

    async def put_approval(self, approval: Approval) -> Approval:
        found = self._approvals.get(approval.approval_id)
        if found is not None:
            return found[0]
        self._approvals[approval.approval_id] = (approval, approval.expires_at + TOMBSTONE_SECONDS)
        return approval

    async def get_approval(self, approval_id: str) -> Approval | None:
        found = self._approvals.get(approval_id)
        return found[0] if found is not None else None

    async def replace_approval(self, approval: Approval) -> bool:
        return _replace_at_rev(self._approvals, approval.approval_id, approval)

    async def open_approvals(self, now: float) -> list[Approval]:
        live = [approval for approval, _ in list(self._approvals.values()) if approval.expires_at > now]
        return sorted(live, key=lambda approval: approval.requested_at, reverse=True)

    async def create_task(self, task: Task) -> Task:
        for stored, _ in list(self._tasks.values()):
            same = (stored.caller, stored.key) == (task.caller, task.key)
            if same and not stored.terminal and stored.expires_at > task.created_at:
                return stored
        self._tasks[task.task_id] = (task, task.expires_at)
        return task

    async def get_task(self, task_id: str) -> Task | None:
        found = self._tasks.get(task_id)
        return found[0] if found is not None else None

    async def replace_task(self, task: Task) -> bool:
        found = self._tasks.get(task.task_id)
        if not task_moves(found[0].status if found is not None else None, task.status):
            return False
        return _replace_at_rev(self._tasks, task.task_id, task)

    async def live_tasks(self, now: float) -> list[Task]:
        live = [task for task, _ in list(self._tasks.values()) if not task.terminal and task.expires_at > now]
        return sorted(live, key=lambda task: task.created_at)

    async def put_session(self, session: ApproverSession) -> None:
        self._sessions[session.session_id] = (session, session.expires_at)

    async def get_session(self, session_id: str, now: float) -> ApproverSession | None:
        found = self._sessions.get(session_id)
        return found[0] if found is not None and found[0].expires_at > now else None

    async def delete_session(self, session_id: str) -> bool:
        return self._sessions.pop(session_id, None) is not None

    async def sessions(self, now: float) -> list[ApproverSession]:
        live = [session for session, _ in list(self._sessions.values()) if session.expires_at > now]
        return sorted(live, key=lambda session: session.created_at, reverse=True)


def _replace_at_rev(kept: TLRUCache[str, tuple[Revised, float]], name: str, record: Revised) -> bool:
    """Store ``record`` with ``rev + 1`` if the kept one is still at ``record.rev``."""
    found = kept.get(name)
    if found is None or found[0].rev != record.rev:
        return False
    kept[name] = (replace(record, rev=record.rev + 1), found[1])
    return True
