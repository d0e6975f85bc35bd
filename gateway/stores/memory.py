"""The in-memory store: TTL maps in one process. For tests and throwaway runs; lost on exit."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from dataclasses import replace
from typing import Any, TypeVar

from cachetools import TLRUCache

from gateway.audit.chain import ChainKeys, checkpoint, sealed
from gateway.records import (
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
from gateway.stores.base import claim_refusal, key_moves, settles, task_moves
from gateway.stores.buckets import LocalBuckets
from gateway.stores.locks import KeyedLocks

MAX_ITEMS = 1_000_000


def _until(_key: Any, value: tuple[Any, float], _now: float) -> float:
    return value[1]


Revised = TypeVar("Revised", Approval, Task)


def _replace_at_rev(kept: TLRUCache[str, tuple[Revised, float]], name: str, record: Revised) -> bool:
    """Store ``record`` with ``rev + 1`` if the kept one is still at ``record.rev``."""
    found = kept.get(name)
    if found is None or found[0].rev != record.rev:
        return False
    kept[name] = (replace(record, rev=record.rev + 1), found[1])
    return True


class MemoryStore:
    """Plans, keys and nonces in TTL maps; the audit in a list."""

    def __init__(self, keys: ChainKeys | None = None) -> None:
        self._keys = keys or ChainKeys.ephemeral()
        self._plans: TLRUCache[str, tuple[Plan, float]] = TLRUCache(MAX_ITEMS, _until, timer=time.time)
        self._records: TLRUCache[tuple[str, str], tuple[KeyRecord, float]] = TLRUCache(
            MAX_ITEMS, _until, timer=time.time
        )
        self._nonces: TLRUCache[str, tuple[None, float]] = TLRUCache(MAX_ITEMS, _until, timer=time.time)
        self._audit: list[AuditEntry] = []
        self._approvals: TLRUCache[str, tuple[Approval, float]] = TLRUCache(MAX_ITEMS, _until, timer=time.time)
        self._sessions: TLRUCache[str, tuple[ApproverSession, float]] = TLRUCache(MAX_ITEMS, _until, timer=time.time)
        self._writes: dict[str, list[float]] = {}
        self._tasks: TLRUCache[str, tuple[Task, float]] = TLRUCache(MAX_ITEMS, _until, timer=time.time)
        self._locks = KeyedLocks()
        self._buckets = LocalBuckets()

    async def put_plan(self, plan: Plan, now: float) -> None:
        self._plans[plan.plan_id] = (plan, plan.expires_at + TOMBSTONE_SECONDS)

    async def get_plan(self, plan_id: str, now: float) -> Plan | Expired | None:
        found = self._plans.get(plan_id)
        if found is None:
            return None
        plan = found[0]
        return Expired(plan.caller) if now >= plan.expires_at else plan

    async def get_record(self, caller: str, key: str) -> KeyRecord | None:
        found = self._records.get((caller, key))
        return found[0] if found else None

    async def claim(self, record: KeyRecord, now: float, retention: float) -> Claim:
        plan = await self.get_plan(record.plan_id, now)
        refusal = claim_refusal(await self.get_record(record.caller, record.key), plan)
        if refusal is not None:
            return refusal
        assert isinstance(plan, Plan)
        self._records[(record.caller, record.key)] = (record, now + retention)
        self._plans[plan.plan_id] = (replace(plan, in_use_by=record.key), plan.expires_at + TOMBSTONE_SECONDS)
        return Claim(claimed=True)

    async def release(self, record: KeyRecord) -> None:
        kept = self._records.get((record.caller, record.key))
        if key_moves(kept[0] if kept else None, "release"):
            self._records.pop((record.caller, record.key), None)
        found = self._plans.get(record.plan_id)
        if found is not None and found[0].in_use_by == record.key:
            self._plans[record.plan_id] = (replace(found[0], in_use_by=None), found[1])

    async def settle(self, record: KeyRecord, entry: AuditEntry | None = None) -> AuditEntry | None:
        # No await in here: the entry and the outcome are stored in one step.
        stored = self._append(entry) if entry is not None else None
        found = self._records.get((record.caller, record.key))
        if settles(found[0] if found else None, record) and found is not None:
            self._records[(record.caller, record.key)] = (record, found[1])
        self._plans.pop(record.plan_id, None)
        return stored

    async def consume_plan(self, plan_id: str) -> bool:
        found = self._plans.get(plan_id)
        if found is None or found[0].in_use_by is not None:
            return False
        del self._plans[plan_id]
        return True

    async def use_nonce(self, nonce: str, now: float, ttl: float) -> bool:
        if nonce in self._nonces:
            return False
        self._nonces[nonce] = (None, now + ttl)
        return True

    async def serve_from(self, holder: str) -> None:
        return None  # nothing outside this process can see it

    async def recover_in_flight(self) -> list[KeyRecord]:
        return []  # a new process starts with an empty memory store

    async def take_token(self, bucket: str, per_second: float, burst: int, now: float) -> float:
        return self._buckets.take(bucket, per_second, burst, now)

    def lock(self, target: str) -> AbstractAsyncContextManager[None]:
        return self._locks.hold(target)

    async def append_audit(self, entry: AuditEntry) -> AuditEntry:
        return self._append(entry)

    def _append(self, entry: AuditEntry) -> AuditEntry:
        stored = sealed(entry, self._audit[-1] if self._audit else None, self._keys)
        self._audit.append(stored)
        return stored

    async def trim_audit(self, before: float, now: float) -> AuditEntry | None:
        cut = next((n for n, entry in enumerate(self._audit) if entry.at >= before), len(self._audit))
        if cut == 0:
            return None
        stored = sealed(checkpoint(self._audit[cut - 1], cut, before, now), self._audit[-1], self._keys)
        self._audit[:cut] = []
        self._audit.append(stored)
        return stored

    async def audit_entries(self) -> AsyncIterator[AuditEntry]:
        for entry in list(self._audit):
            yield entry

    async def count_write(self, scopes: list[str], now: float) -> None:
        for scope in scopes:
            kept = [at for at in self._writes.get(scope, []) if at > now - WRITE_WINDOWS["day"]]
            self._writes[scope] = [*kept, now]

    async def recent_writes(self, scopes: list[str], now: float) -> dict[str, dict[str, int]]:
        return {
            scope: {
                window: sum(1 for at in self._writes.get(scope, []) if now - seconds < at <= now)
                for window, seconds in WRITE_WINDOWS.items()
            }
            for scope in scopes
        }

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

    async def close(self) -> None:
        return None
