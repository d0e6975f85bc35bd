"""The store interface: what every store (memory, SQLite, Redis, PostgreSQL) keeps and how, as one contract, by role.

    Plans       previewed writes and their tombstones        put_plan, get_plan, consume_plan
    KeyRecords  idempotency keys, claimed and settled        get_record, claim, release, settle, recover_in_flight
    Nonces      single-use confirmation states               use_nonce
    Locks       one holder per target                        lock
    Counters    rate-limit buckets, write budgets            take_token, count_write, recent_writes
    AuditLog    the hash-chained audit                       append_audit, trim_audit, audit_entries
    Approvals   writes waiting on the approval page          put_approval, get_approval, replace_approval, ...
    Tasks       url-mode writes followed as MCP tasks        create_task, get_task, replace_task, live_tasks
    ApproverSessions  people signed in on the page           put_session, get_session, delete_session, sessions
    Passkeys    approvers' enrolled WebAuthn credentials     put_passkey, get_passkey, replace_passkey, passkeys
    Store       all of them, plus serve_from and close       what open_store returns

A part of the gateway that needs one role takes that protocol (the rate limiter takes Counters). A store is built
by role family (FAMILIES: keys, audit, counters, page state, passkeys), one module each.

The records it keeps are in gateway.records, written and read as text by one codec (gateway/stores/codec.py);
tests/unit/test_store_contract.py runs one set of tests against every implementation.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

from gateway.errors import OutcomeNotRecorded, StoreInUse, StoreUnavailable
from gateway.records import (
    ABSENT,
    KEY_TRANSITIONS,
    Approval,
    ApproverSession,
    AuditEntry,
    Claim,
    Expired,
    KeyRecord,
    Passkey,
    Plan,
    Task,
    key_leaves,
    task_leaves,
)

__all__ = [
    "FAMILIES",
    "OPERATIONS",
    "ROLES",
    "Approvals",
    "ApproverSessions",
    "AuditLog",
    "Counters",
    "KeyRecords",
    "Locks",
    "Nonces",
    "OutcomeNotRecorded",
    "Passkeys",
    "Plans",
    "Store",
    "StoreInUse",
    "StoreUnavailable",
    "Tasks",
    "claim_refusal",
    "key_leaves",
    "key_moves",
    "settles",
    "task_leaves",
    "task_moves",
]

log = logging.getLogger(__name__)


def key_moves(current: KeyRecord | None, event: str) -> bool:
    """Whether KEY_TRANSITIONS lets ``event`` change a key from its stored state (None: no record). The memory,
    SQLite and PostgreSQL stores ask this inside their atomic step; Redis's scripts get the same answer as
    key_leaves."""
    return (current.state if current is not None else ABSENT, event) in KEY_TRANSITIONS


def claim_refusal(existing: KeyRecord | None, plan: Plan | Expired | None) -> Claim | None:
    """The rule every store's atomic claim applies: a key already recorded, or a plan gone or in use, refuses."""
    if not key_moves(existing, "claim"):
        return Claim(claimed=False, existing=existing)
    if not isinstance(plan, Plan) or plan.in_use_by is not None:
        return Claim(claimed=False, plan_busy=True)
    return None


def settles(current: KeyRecord | None, record: KeyRecord) -> bool:
    """Whether settling ``record`` may store it over the stored key: when the table lets its outcome follow the
    stored state, or it is the same outcome again (a retry after a lost answer). Anything else is logged and not
    recorded."""
    if current is not None and current.state == record.state:
        return True
    if key_moves(current, record.state):
        return True
    state = current.state if current is not None else ABSENT
    log.warning("key %s is %s, not in flight: its outcome %s was not recorded", record.key, state, record.state)
    return False


def task_moves(current: str | None, status: str) -> bool:
    """Whether TASK_TRANSITIONS lets a task stored at status ``current`` (None: no task) be stored at ``status``.
    The memory and SQLite stores ask this inside their atomic replace; PostgreSQL and Redis are passed the same
    answer as task_leaves."""
    return current is not None and current in task_leaves(status)


class Plans(Protocol):
    """Previewed writes, live until they expire and then their owner's tombstone for an hour."""

    async def put_plan(self, plan: Plan, now: float) -> None: ...

    async def get_plan(self, plan_id: str, now: float) -> Plan | Expired | None: ...

    async def consume_plan(self, plan_id: str) -> bool:
        """Delete a plan no key has claimed (its prompt was declined), atomically; False if it is missing or in
        use. Its caller then hears plan_not_found and must preview again."""
        ...


class KeyRecords(Protocol):
    """What each (caller, idempotencyKey) did or is doing, changed only as KEY_TRANSITIONS allows."""

    async def get_record(self, caller: str, key: str) -> KeyRecord | None: ...

    async def claim(self, record: KeyRecord, now: float, retention: float) -> Claim:
        """Atomically: if the key is free and the plan is live and unused, record the key in flight
        and mark the plan in use by it."""
        ...

    async def release(self, record: KeyRecord) -> None:
        """Undo a claim whose write was never sent: forget the key, unmark the plan."""
        ...

    async def settle(self, record: KeyRecord, entry: AuditEntry | None = None) -> AuditEntry | None:
        """Record the outcome under the key and delete the plan, atomically. With ``entry``, append it to the
        audit first: in the same transaction where the store has one (SQLite, PostgreSQL, memory: one commit, and
        a crash keeps both or neither), else just before (Redis: OutcomeNotRecorded when the entry went in and the
        outcome did not). Returns the entry as stored (sealed), if any."""
        ...

    async def recover_in_flight(self) -> list[KeyRecord]:
        """At start-up: settle every key left in flight by a crashed process as ``unknown``; return them."""
        ...


class Nonces(Protocol):
    """Single use of a 2026 confirmation state within its TTL."""

    async def use_nonce(self, nonce: str, now: float, ttl: float) -> bool:
        """True the first time a nonce is used within its TTL, False after."""
        ...


class Locks(Protocol):
    """One holder per target at a time (across replicas, for a shared store)."""

    def lock(self, target: str) -> AbstractAsyncContextManager[None]: ...


class Counters(Protocol):
    """What is counted over time: rate-limit buckets and the writes the approval rules budget."""

    async def take_token(self, bucket: str, per_second: float, burst: int, now: float) -> float:
        """Take one token from a rate-limit bucket: 0 when taken, else the seconds until one is free."""
        ...

    async def count_write(self, scopes: list[str], now: float, rows: int = 0) -> None:
        """Count one write (applied or outcome unknown) touching ``rows`` rows under each scope, for the last
        WRITE_WINDOWS."""
        ...

    async def recent_writes(self, scopes: list[str], now: float, rows: bool = False) -> dict[str, dict[str, int]]:
        """Per scope, the writes counted within each of WRITE_WINDOWS before ``now``; with ``rows``, the sum of
        the rows they touched instead."""
        ...


class AuditLog(Protocol):
    """The audit entries, one hash chain in append order (gateway/audit/chain.py)."""

    async def append_audit(self, entry: AuditEntry) -> AuditEntry:
        """Append an entry, sealed into the chain atomically; returns it as stored."""
        ...

    async def trim_audit(self, before: float, now: float) -> AuditEntry | None:
        """Delete the oldest entries, up to the first at or after ``before``, and append a checkpoint naming the
        last one deleted (so the rest still verifies), in one atomic step; the checkpoint, or None if nothing
        was older."""
        ...

    def audit_entries(self) -> AsyncIterator[AuditEntry]: ...


class Approvals(Protocol):
    """Writes waiting for (or given) the yes of people on the approval page."""

    async def put_approval(self, approval: Approval) -> Approval:
        """Store an approval unless one is stored under its id; return the stored one (this or the earlier)."""
        ...

    async def get_approval(self, approval_id: str) -> Approval | None: ...

    async def replace_approval(self, approval: Approval) -> bool:
        """Store ``approval`` with ``rev + 1`` if the stored one is still at ``approval.rev``; else False."""
        ...

    async def open_approvals(self, now: float) -> list[Approval]:
        """Every approval still kept that expires after ``now``, newest first (the approval page's list; it asks
        from an hour back, TOMBSTONE_SECONDS, to show the expired ones the store still keeps)."""
        ...


class Tasks(Protocol):
    """Url-mode writes a client follows as MCP tasks, each kept until its ``expires_at``."""

    async def create_task(self, task: Task) -> Task:
        """Store a new task unless a live one (not terminal, not expired at ``task.created_at``) is stored for the
        same (caller, key); return the stored one (this or that one), atomically."""
        ...

    async def get_task(self, task_id: str) -> Task | None: ...

    async def replace_task(self, task: Task) -> bool:
        """Store ``task`` with ``rev + 1`` if the stored one is still at ``task.rev`` and TASK_TRANSITIONS lets
        its status follow the stored one (task_moves), atomically; else False, and the stored task is unchanged."""
        ...

    async def live_tasks(self, now: float) -> list[Task]:
        """Every task not terminal and not expired, oldest first (what a gateway resumes)."""
        ...


class ApproverSessions(Protocol):
    """People signed in on the approval page, until they sign out, expire or an operator revokes them."""

    async def put_session(self, session: ApproverSession) -> None:
        """Keep a new session until its ``expires_at``."""
        ...

    async def get_session(self, session_id: str, now: float) -> ApproverSession | None:
        """The session by id, unless it expired, was deleted or never existed."""
        ...

    async def delete_session(self, session_id: str) -> bool:
        """Revoke a session (sign-out, the operator); False if there was none."""
        ...

    async def sessions(self, now: float) -> list[ApproverSession]:
        """Every live session, newest first (the operator's list)."""
        ...


class Passkeys(Protocol):
    """Approvers' WebAuthn credentials, kept until revoked and after (gateway.approvals.passkeys)."""

    async def put_passkey(self, passkey: Passkey) -> bool:
        """Store a new passkey unless one is stored under its credential id; False then (nothing changes)."""
        ...

    async def get_passkey(self, credential_id: str) -> Passkey | None: ...

    async def replace_passkey(self, passkey: Passkey) -> bool:
        """Store ``passkey`` with ``rev + 1`` if the stored one is still at ``passkey.rev``; else False."""
        ...

    async def passkeys(self) -> list[Passkey]:
        """Every passkey, revoked ones too, newest first."""
        ...


class Store(
    Plans, KeyRecords, Nonces, Locks, Counters, AuditLog, Approvals, ApproverSessions, Tasks, Passkeys, Protocol
):
    """Every role in one store, as a gateway opens it. Methods take ``now`` so that expiry is testable."""

    async def serve_from(self, holder: str) -> None:
        """At start-up, before recovery: make this process one that serves the store. A store that serves one
        process at a time (SQLite) raises StoreInUse naming the process that holds it; ``holder`` describes
        this one to the next process that tries."""
        ...

    async def close(self) -> None: ...


ROLES: tuple[type[Any], ...] = (
    Plans,
    KeyRecords,
    Nonces,
    Locks,
    Counters,
    AuditLog,
    Approvals,
    ApproverSessions,
    Tasks,
    Passkeys,
    Store,
)
FAMILIES: dict[str, tuple[type[Any], ...]] = {
    "keys": (Plans, KeyRecords, Nonces, Locks),
    "audit": (AuditLog,),
    "counters": (Counters,),
    "page_state": (Approvals, Tasks, ApproverSessions),
    "passkeys": (Passkeys,),
}
"""The role families every store is split by: each store package has one module of each name, whose class does
exactly its roles' operations, and its ``store`` module composes those classes (tests/unit/test_store_layout.py).
A new role joins a family, or is a family of its own: then one more module in every store package."""
OPERATIONS = frozenset(name for role in ROLES for name in vars(role) if not name.startswith("_"))
"""Every operation a store has, by name (the instrumented wrapper's metric labels come from these)."""
