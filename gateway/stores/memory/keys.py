"""The in-memory store's keys: plans (kept an hour past their expiry, the tombstone), idempotency keys (kept for
the retention), nonces and per-target locks in this process."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from dataclasses import replace

from cachetools import TLRUCache

from gateway.audit.chain import ChainKeys
from gateway.records import TOMBSTONE_SECONDS, AuditEntry, Claim, Expired, KeyRecord, Plan
from gateway.stores.base import claim_refusal, key_moves, settles
from gateway.stores.locks import KeyedLocks
from gateway.stores.memory.audit import append
from gateway.stores.memory.maps import MemoryMaps, expiring


class MemoryKeys(MemoryMaps):
    """The Plans, KeyRecords, Nonces and Locks roles (gateway.stores.base)."""

    def __init__(self, keys: ChainKeys | None = None) -> None:
        super().__init__(keys)
        self._plans: TLRUCache[str, tuple[Plan, float]] = expiring()
        self._records: TLRUCache[tuple[str, str], tuple[KeyRecord, float]] = expiring()
        self._nonces: TLRUCache[str, tuple[None, float]] = expiring()
        self._locks = KeyedLocks()

    async def put_plan(self, plan: Plan, now: float) -> None:
        self._plans[plan.plan_id] = (plan, plan.expires_at + TOMBSTONE_SECONDS)

    async def get_plan(self, plan_id: str, now: float) -> Plan | Expired | None:
        found = self._plans.get(plan_id)
        if found is None:
            return None
        plan = found[0]
        return Expired(plan.caller) if now >= plan.expires_at else plan

    async def consume_plan(self, plan_id: str) -> bool:
        found = self._plans.get(plan_id)
        if found is None or found[0].in_use_by is not None:
            return False
        del self._plans[plan_id]
        return True

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
        stored = append(self._audit, entry, self._keys) if entry is not None else None
        found = self._records.get((record.caller, record.key))
        if settles(found[0] if found else None, record) and found is not None:
            self._records[(record.caller, record.key)] = (record, found[1])
        self._plans.pop(record.plan_id, None)
        return stored

    async def recover_in_flight(self) -> list[KeyRecord]:
        return []  # a new process starts with an empty memory store

    async def use_nonce(self, nonce: str, now: float, ttl: float) -> bool:
        if nonce in self._nonces:
            return False
        self._nonces[nonce] = (None, now + ttl)
        return True

    def lock(self, target: str) -> AbstractAsyncContextManager[None]:
        return self._locks.hold(target)
