"""The store interface and the records it keeps."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

TOMBSTONE_SECONDS = 3600

KeyState = Literal["in_flight", "applied", "unknown", "error"]


class StoreUnavailable(Exception):
    """The store could not be reached (a shared store's server is down or unreachable); fail closed."""


@dataclass(frozen=True)
class Plan:
    """A previewed write: what it will do, to what, for whom, until when."""

    plan_id: str
    caller: str
    tool: str
    target: str
    version: Any
    arguments: dict[str, Any]
    summary: dict[str, Any]
    expires_at: float
    in_use_by: str | None = None


@dataclass(frozen=True)
class Expired:
    """What is left of a plan after its TTL: who owned it, for an hour."""

    caller: str


@dataclass(frozen=True)
class KeyRecord:
    """What one (caller, idempotencyKey) did, or is doing."""

    caller: str
    key: str
    plan_id: str
    target: str
    state: KeyState
    result: dict[str, Any] | None = None


@dataclass(frozen=True)
class Claim:
    """The answer to an atomic claim: claimed, or why not."""

    claimed: bool
    existing: KeyRecord | None = None
    plan_busy: bool = False


@dataclass(frozen=True)
class AuditEntry:
    """One decision of a write tool."""

    at: float
    caller: str
    tool: str
    outcome: str
    plan_id: str | None = None
    idempotency_key: str | None = None
    target: str | None = None
    version_before: Any = None
    version_after: Any = None
    confirmation: str | None = None
    code: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    seq: int = 0
    prev_hash: str = ""
    hash: str = ""


def claim_refusal(existing: KeyRecord | None, plan: Plan | Expired | None) -> Claim | None:
    """The rule every store's atomic claim applies: a key already recorded, or a plan gone or in use, refuses."""
    if existing is not None:
        return Claim(claimed=False, existing=existing)
    if not isinstance(plan, Plan) or plan.in_use_by is not None:
        return Claim(claimed=False, plan_busy=True)
    return None


class Store(Protocol):
    """What every store provides. Methods take ``now`` so that expiry is testable."""

    async def put_plan(self, plan: Plan, now: float) -> None: ...

    async def get_plan(self, plan_id: str, now: float) -> Plan | Expired | None: ...

    async def get_record(self, caller: str, key: str) -> KeyRecord | None: ...

    async def claim(self, record: KeyRecord, now: float, retention: float) -> Claim:
        """Atomically: if the key is free and the plan is live and unused, record the key in flight
        and mark the plan in use by it."""
        ...

    async def release(self, record: KeyRecord) -> None:
        """Undo a claim whose write was never sent: forget the key, unmark the plan."""
        ...

    async def settle(self, record: KeyRecord) -> None:
        """Record the outcome under the key and delete the plan, atomically."""
        ...

    async def use_nonce(self, nonce: str, now: float, ttl: float) -> bool:
        """True the first time a nonce is used within its TTL, False after."""
        ...

    async def recover_in_flight(self) -> list[KeyRecord]:
        """At start-up: settle every key left in flight by a crashed process as ``unknown``; return them."""
        ...

    async def take_token(self, bucket: str, per_second: float, burst: int, now: float) -> float:
        """Take one token from a rate-limit bucket: 0 when taken, else the seconds until one is free."""
        ...

    def lock(self, target: str) -> AbstractAsyncContextManager[None]: ...

    async def append_audit(self, entry: AuditEntry) -> None:
        """Append an entry, sealed into the hash chain (gateway/stores/chain.py) atomically."""
        ...

    def audit_entries(self) -> AsyncIterator[AuditEntry]: ...

    async def close(self) -> None: ...
