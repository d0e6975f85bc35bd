"""The PostgreSQL store's keys: ``plans``, ``idempotency`` and ``nonces``, and the leased per-target locks (``locks``:
gateway.stores.postgres.leases). A claim, release or settle is one transaction taking row locks key row first, then
plan row, then the audit tail; each reads the key's stored state and changes it only as KEY_TRANSITIONS allows. A
key in flight whose owner no longer holds its lock is settled ``unknown`` by the next read (the package docstring
says how the fencing works)."""

from __future__ import annotations

import logging
import time
from contextlib import AbstractAsyncContextManager
from typing import Any

from gateway.audit.chain import ChainKeys
from gateway.crashpoints import crash_point
from gateway.records import TOMBSTONE_SECONDS, AuditEntry, Claim, Expired, KeyRecord, Plan
from gateway.stores import codec
from gateway.stores.base import StoreUnavailable, claim_refusal, key_leaves, key_moves, settles
from gateway.stores.leases import LeasedLocks
from gateway.stores.postgres.audit import append_in
from gateway.stores.postgres.leases import PostgresLeases
from gateway.stores.postgres.pool import Conn, PostgresPool

log = logging.getLogger(__name__)

LIVE_LOCK = (
    "EXISTS (SELECT 1 FROM locks l WHERE l.target = i.target AND l.token = i.owner"
    " AND l.expires_at > clock_timestamp())"
)
"""Whether the key row ``i``'s owner still holds its target's lock."""
RECORD = f"SELECT body, state, owner, {LIVE_LOCK} FROM idempotency i WHERE caller = %s AND key = %s"


class PostgresKeys(PostgresPool):
    """The Plans, KeyRecords, Nonces and Locks roles (gateway.stores.base)."""

    def __init__(self, url: str, keys: ChainKeys | None = None) -> None:
        super().__init__(url, keys)
        self._locks = LeasedLocks(PostgresLeases(self), self.lease, "postgres-store")

    async def put_plan(self, plan: Plan, now: float) -> None:
        async def steps(conn: Conn) -> None:
            await self._purge(conn, now)
            await conn.execute(
                "INSERT INTO plans (plan_id, caller, tool, target, body, in_use_by, expires_at, purge_at)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (plan_id) DO UPDATE SET"
                " body = EXCLUDED.body, in_use_by = EXCLUDED.in_use_by, expires_at = EXCLUDED.expires_at,"
                " purge_at = EXCLUDED.purge_at",
                [
                    plan.plan_id,
                    plan.caller,
                    plan.tool,
                    plan.target,
                    codec.dump(plan),
                    plan.in_use_by,
                    plan.expires_at,
                    plan.expires_at + TOMBSTONE_SECONDS,
                ],
            )

        await self._transaction(steps)

    async def get_plan(self, plan_id: str, now: float) -> Plan | Expired | None:
        return await self._run(lambda conn: _plan(conn, plan_id, now))

    async def consume_plan(self, plan_id: str) -> bool:
        return await self._count("DELETE FROM plans WHERE plan_id = %s AND in_use_by IS NULL", [plan_id]) == 1

    async def get_record(self, caller: str, key: str) -> KeyRecord | None:
        return await self._unless_orphaned(await self._one(RECORD, [caller, key]))

    async def claim(self, record: KeyRecord, now: float, retention: float) -> Claim:
        token = self._locks.token(record.target)

        async def steps(conn: Conn) -> tuple[Claim, tuple[Any, ...] | None]:
            await conn.execute(
                "DELETE FROM idempotency WHERE caller = %s AND key = %s AND purge_at < %s AND state <> 'in_flight'",
                [record.caller, record.key, now],
            )
            found = await (await conn.execute(RECORD + " FOR UPDATE", [record.caller, record.key])).fetchone()
            if not key_moves(_record(found), "claim"):
                return Claim(claimed=False), found
            if token and not await _holds(conn, record.target, token):
                log.warning("lock on %s lapsed before the claim of a key; the key was not claimed", record.target)
                return Claim(claimed=False, plan_busy=True), None
            plan = await _plan(conn, record.plan_id, now, lock=True)
            refusal = claim_refusal(None, plan)
            if refusal is not None:
                # The same key claimed a moment ago by a call that got here first: answer with its record.
                raced = isinstance(plan, Plan) and plan.in_use_by == record.key
                again = await (await conn.execute(RECORD, [record.caller, record.key])).fetchone() if raced else None
                return (refusal, None) if again is None else (Claim(claimed=False), again)
            inserted = await conn.execute(
                "INSERT INTO idempotency (caller, key, plan_id, target, tool, state, owner, body, claimed_at, purge_at)"
                " VALUES (%s, %s, %s, %s, %s, 'in_flight', %s, %s, %s, %s) ON CONFLICT (caller, key) DO NOTHING",
                [
                    record.caller,
                    record.key,
                    record.plan_id,
                    record.target,
                    record.tool,
                    token,
                    codec.dump(record),
                    now,
                    now + retention,
                ],
            )
            if inserted.rowcount != 1:
                return Claim(claimed=False), await (await conn.execute(RECORD, [record.caller, record.key])).fetchone()
            await conn.execute("UPDATE plans SET in_use_by = %s WHERE plan_id = %s", [record.key, record.plan_id])
            return Claim(claimed=True), None

        claim, existing = await self._transaction(steps)
        if existing is not None:
            return Claim(claimed=False, existing=await self._unless_orphaned(existing))
        if claim.claimed:
            self._locks.claimed(record, token)
        return claim

    async def release(self, record: KeyRecord) -> None:
        token = self._locks.owner(record)

        async def steps(conn: Conn) -> None:
            found = await (await conn.execute(RECORD + " FOR UPDATE", [record.caller, record.key])).fetchone()
            if key_moves(_record(found), "release") and found is not None and found[2] == token:
                await conn.execute(
                    "DELETE FROM idempotency WHERE caller = %s AND key = %s", [record.caller, record.key]
                )
            await conn.execute(
                "UPDATE plans SET in_use_by = NULL WHERE plan_id = %s AND in_use_by = %s", [record.plan_id, record.key]
            )

        await self._transaction(steps)
        self._locks.forget(record)

    async def settle(self, record: KeyRecord, entry: AuditEntry | None = None) -> AuditEntry | None:
        token = self._locks.owner(record)

        async def steps(conn: Conn) -> AuditEntry | None:
            found = await (await conn.execute(RECORD + " FOR UPDATE", [record.caller, record.key])).fetchone()
            current = _record(found)
            if current == record and found is not None and found[2] == token:
                # This very settle committed already and its reply was lost: storing the entry again would audit
                # the write twice.
                await conn.execute("DELETE FROM plans WHERE plan_id = %s", [record.plan_id])
                return None
            stored = await append_in(conn, entry, self._keys) if entry is not None else None
            crash_point("mid-settle")  # the entry is inserted, not committed: a crash here loses both
            if found is not None and found[2] == token and settles(current, record):
                await conn.execute(
                    "UPDATE idempotency SET state = %s, body = %s, settled_at = %s WHERE caller = %s AND key = %s",
                    [record.state, codec.dump(record), time.time(), record.caller, record.key],
                )
            elif found is not None and found[2] != token:
                log.warning(
                    "key %s was no longer this call's in-flight claim (its lock lapsed); its outcome %s was not "
                    "recorded",
                    record.key,
                    record.state,
                )
            await conn.execute("DELETE FROM plans WHERE plan_id = %s", [record.plan_id])
            return stored

        stored = await self._transaction(steps)
        self._locks.forget(record)
        return stored

    async def recover_in_flight(self) -> list[KeyRecord]:
        # Other replicas keep running: only keys whose owner no longer holds its lock were left by a crash. Every
        # read applies the same rule, so this start-up sweep only settles them sooner.
        try:
            rows = await self._sweep()
        except StoreUnavailable as exc:
            log.warning("could not sweep keys left in flight (%s); each is settled when next read", exc)
            return []
        return [codec.load(KeyRecord, body, state="unknown") for (body,) in rows]

    async def _sweep(self) -> list[tuple[Any, ...]]:
        return await self._rows(
            f"""
            WITH gone AS (
                SELECT caller, key FROM idempotency i
                WHERE state = ANY(%(leaves)s) AND owner <> '' AND NOT {LIVE_LOCK}
                FOR UPDATE SKIP LOCKED),
            settled AS (
                UPDATE idempotency i SET state = 'unknown', settled_at = %(now)s FROM gone
                WHERE i.caller = gone.caller AND i.key = gone.key
                RETURNING i.body, i.plan_id),
            dropped AS (DELETE FROM plans WHERE plan_id IN (SELECT plan_id FROM settled))
            SELECT body FROM settled
            """,
            {"leaves": key_leaves("unknown"), "now": time.time()},
        )

    async def use_nonce(self, nonce: str, now: float, ttl: float) -> bool:
        first = await self._one(
            "INSERT INTO nonces AS n (nonce, purge_at) VALUES (%s, %s) ON CONFLICT (nonce) DO UPDATE"
            " SET purge_at = EXCLUDED.purge_at WHERE n.purge_at < %s RETURNING 1",
            [nonce, now + ttl, now],
        )
        return first is not None

    def lock(self, target: str) -> AbstractAsyncContextManager[None]:
        return self._locks.hold(target)

    async def _unless_orphaned(self, row: tuple[Any, ...] | None) -> KeyRecord | None:
        """A record from its row; an in-flight one whose owner lost its lock is settled unknown (plan deleted)."""
        record = _record(row)
        if record is None or row is None or record.state != "in_flight" or not row[2] or row[3]:
            return record

        async def steps(conn: Conn) -> KeyRecord | None:
            gone = await (
                await conn.execute(
                    f"UPDATE idempotency i SET state = 'unknown', settled_at = %s WHERE caller = %s AND key = %s"
                    f" AND state = ANY(%s) AND owner = %s AND NOT {LIVE_LOCK} RETURNING plan_id",
                    [time.time(), record.caller, record.key, key_leaves("unknown"), row[2]],
                )
            ).fetchone()
            if gone is not None:
                await conn.execute("DELETE FROM plans WHERE plan_id = %s", [gone[0]])
            return _record(await (await conn.execute(RECORD, [record.caller, record.key])).fetchone())

        return await self._transaction(steps)


async def _plan(conn: Conn, plan_id: str, now: float, *, lock: bool = False) -> Plan | Expired | None:
    query = "SELECT body, in_use_by FROM plans WHERE plan_id = %s AND purge_at >= %s" + (" FOR UPDATE" if lock else "")
    row = await (await conn.execute(query, [plan_id, now])).fetchone()
    if row is None:
        return None
    plan = codec.load(Plan, row[0], in_use_by=row[1])
    return Expired(plan.caller) if now >= plan.expires_at else plan


async def _holds(conn: Conn, target: str, token: str) -> bool:
    """Whether ``token`` still holds the target's lock (its lease not lapsed)."""
    query = "SELECT 1 FROM locks WHERE target = %s AND token = %s AND expires_at > clock_timestamp() FOR SHARE"
    return await (await conn.execute(query, [target, token])).fetchone() is not None


def _record(row: tuple[Any, ...] | None) -> KeyRecord | None:
    """A KeyRecord from its row (body, state, owner, ...); the state column wins over the body's copy."""
    return None if row is None else codec.load(KeyRecord, row[0], state=row[1])
