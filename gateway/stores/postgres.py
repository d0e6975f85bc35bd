"""The PostgreSQL store: several gateway replicas keep plans, keys, locks, nonces, buckets, approvals, approver
sessions, tasks and the audit in one database, the one an operator already backs up, replicates and queries.

``store = "postgresql://gateway@db.internal:5432/gateway?sslmode=verify-full&sslrootcert=/etc/ssl/db-ca.pem"``;
gateway/stores/postgres_url.py says which parameters are ours and which libpq's, and why the config never holds
the password. The tables live in the URL's ``schema`` (default ``gateway``), made and upgraded by
``mcp-safety-gateway migrate`` (gateway/stores/postgres_schema.py, migrations in postgres_migrations/); ``serve``
and ``check`` refuse a database whose schema version is not this gateway's. Driver: psycopg 3 with its pool
(chosen over asyncpg by bench/pgdriver.py; docs/deployment.md says why). Records are JSON text written and read
by the codec every store shares (gateway/stores/codec.py), beside plain columns an operator can query.

Tables, in the schema::

    plans              plan_id -> caller, tool, target, body, in_use_by, expires_at, purge_at   (the tombstone hour)
    idempotency        (caller, key) -> plan_id, target, tool, state, owner, body, claimed_at, settled_at, purge_at
    nonces             nonce -> purge_at               single use of a 2026 confirmation state within its TTL
    locks              target -> token, fence, expires_at   leases on the database's clock; rows are kept, the
                                                       fence only grows
    buckets            name -> tokens, updated, wait, purge_at   rate limits, on the database's clock; UNLOGGED
                                                       (no WAL, no fsync; a server crash leaves them full)
    writes             (scope, at), one row per write  blast-radius counters; rows older than a day purged
    approvals          approval_id -> plan_id, caller, tool, target, body, rev, requested_at, expires_at, purge_at
    tasks              task_id -> caller, key, tool, status, body, rev, created_at, expires_at   MCP tasks
    approver_sessions  session_id -> person, body, created_at, expires_at   people signed in on the approval page
    audit              seq -> at, caller, tool, outcome, code, target, plan_id, idempotency_key, entry
    audit_tail         one row, locked by each append: the chain has one tail at a time
    schema_migrations  version -> name, applied_at    (postgres_schema.py)

and the views ``audit_log``, ``approval_decisions``, ``unknown_writes`` and ``keys_now`` for operators
(docs/deployment.md shows the queries). ``entry`` is the sealed AuditEntry as the chain hashed it; ``audit verify``
reads only that column, so the plain columns beside it are conveniences, never evidence.

Atomic (each one transaction, READ COMMITTED with row locks, always taken key row first, then plan row, then
the audit tail, so two transactions never wait for each other in a cycle):

- ``claim``: lock the key's row, check the holder's lock is still its own (the fence), lock the plan's row,
  refuse (gateway.stores.base.claim_refusal) or insert the key in flight with its owner token and mark the plan
  in use. A concurrent insert of the same key loses on the primary key and answers with the winner's record.
- ``settle`` with its audit entry: lock the key, lock the audit tail, insert the sealed entry, record the outcome,
  delete the plan: one commit. The outcome and its entry are durable together or not at all (crash point
  ``mid-settle``: after the insert, before the commit). A settle retried after a lost commit reply finds its
  own outcome and stores neither again.
- ``release``, ``consume_plan``, ``append_audit``, ``trim_audit`` (the delete and its checkpoint), approvals'
  and tasks' compare-and-set on ``rev`` (a task's only from a status TASK_TRANSITIONS lets its new one follow,
  ``task_leaves``, in the same statement); ``create_task`` (a transaction-scoped advisory lock on the caller's key,
  then a look for its live task, then the insert, so two replicas never make two tasks for one key); a bucket's
  refill-and-take, a nonce's first use and a lock's acquire are one statement each (``INSERT ... ON CONFLICT DO
  UPDATE ... WHERE``).

Each step that changes a key reads its stored state in the same transaction and changes it only as
KEY_TRANSITIONS (gateway.records) allows (gateway.stores.base.key_moves); anything else leaves the key as it was.

Locks, leases and fencing: exactly as the Redis store (the loop is gateway/stores/leases.py), with a row per
target. A claim records its owner token; while the owner holds the lock the key reads in flight; once the lock
lapsed or another holder took it, the next read settles the key ``unknown`` (and deletes its plan), and a late
settle by the old owner cannot overwrite that. ``recover_in_flight`` at start-up applies the same rule to every
key (``FOR UPDATE SKIP LOCKED``, so replicas starting together do not queue): the other replicas keep running.

Durability is PostgreSQL's: a commit is on the server's disk (and on synchronous standbys, if the operator
configured them) before the backend is called. Taking and freeing a lock commit without waiting for the disk
(``_Leases`` says why that is safe), and the buckets are unlogged. Guarantee: one key never reaches the backend twice.

How it fails. Every operation runs within ``timeout`` (5 s by default: waiting for a pooled connection, and the
server's ``statement_timeout``); a server that is down, restarting, unreachable or stalled, or a connection that
dropped, raises StoreUnavailable, which the write path turns into ``backend_unavailable`` before the claim
(nothing sent). After the claim the backend call does not need the database; an outcome it cannot record is kept
(gateway.write.outcome) and the caller told the truth, and the next write call on this process stores it: the
store remembers the claims it made until they are settled or released, so the kept outcome settles its own
claim even though its lock is gone by then (an orphaned key is unknown by then, and KEY_TRANSITIONS refuses any
other outcome over it). A process that dies with an outcome kept leaves the key in flight, which reads
``unknown`` once its lock lapses. A pooled connection idle for more than a second is checked
(one round trip) before use, so a restarted server costs no failed call, and one in steady use is not. A claim
whose commit reply was lost is refused to its caller and reads ``unknown`` later: nothing was sent, but the
gateway cannot know that.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import replace
from typing import Any, TypeVar

import anyio
import psycopg
from psycopg_pool import AsyncConnectionPool

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
from gateway.stores.base import StoreUnavailable, claim_refusal, key_leaves, key_moves, settles, task_leaves
from gateway.stores.leases import LeasedLocks
from gateway.stores.postgres_url import parse_url

log = logging.getLogger(__name__)

T = TypeVar("T")
Conn = psycopg.AsyncConnection[tuple[Any, ...]]

AUDIT_PAGE = 1000
CHECK_IDLE_SECONDS = 1.0
"""A pooled connection idle longer than this is checked (one round trip) before use."""
PURGE_EVERY = 60.0
"""Seconds between purges of lapsed keys, nonces, buckets, approvals and counted writes (plans: every put)."""
LIVE_LOCK = (
    "EXISTS (SELECT 1 FROM locks l WHERE l.target = i.target AND l.token = i.owner"
    " AND l.expires_at > clock_timestamp())"
)
"""Whether the key row ``i``'s owner still holds its target's lock."""
RECORD = f"SELECT body, state, owner, {LIVE_LOCK} FROM idempotency i WHERE caller = %s AND key = %s"
REFILLED = "least(%(burst)s, b.tokens + greatest(0, EXCLUDED.updated - b.updated) * %(rate)s)"
TAKE_TOKEN = f"""
WITH t AS (SELECT extract(epoch FROM clock_timestamp())::float8 AS now)
INSERT INTO buckets AS b (name, tokens, updated, wait, purge_at)
SELECT %(name)s, %(burst)s - 1, t.now, 0, t.now + %(full)s FROM t
ON CONFLICT (name) DO UPDATE SET
    tokens = CASE WHEN {REFILLED} >= 1 THEN {REFILLED} - 1 ELSE {REFILLED} END,
    wait = CASE WHEN {REFILLED} >= 1 THEN 0 ELSE (1 - {REFILLED}) / %(rate)s END,
    updated = EXCLUDED.updated,
    purge_at = EXCLUDED.purge_at
RETURNING wait
"""
ACQUIRE = """
INSERT INTO locks AS l (target, token, fence, expires_at)
VALUES (%(target)s, '1:' || %(nonce)s, 1, clock_timestamp() + %(lease)s * interval '1 millisecond')
ON CONFLICT (target) DO UPDATE SET
    fence = CASE WHEN l.token = l.fence || ':' || %(nonce)s THEN l.fence ELSE l.fence + 1 END,
    token = CASE WHEN l.token = l.fence || ':' || %(nonce)s THEN l.token ELSE (l.fence + 1) || ':' || %(nonce)s END,
    expires_at = EXCLUDED.expires_at
WHERE l.expires_at <= clock_timestamp() OR l.token = l.fence || ':' || %(nonce)s
RETURNING token
"""
RENEW = """
UPDATE locks SET expires_at = clock_timestamp() + %(lease)s * interval '1 millisecond'
WHERE target = %(target)s AND token = %(token)s AND expires_at > clock_timestamp()
"""
UNLOCK = "UPDATE locks SET token = '', expires_at = '-infinity' WHERE target = %s AND token = %s"
INSERT_AUDIT = (
    "INSERT INTO audit (seq, at, caller, tool, outcome, code, target, plan_id, idempotency_key, entry)"
    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
)
UNREACHABLE = (psycopg.OperationalError, psycopg.InterfaceError, TimeoutError)
"""A server that is down, restarting, unreachable or stalled; a dropped connection; no pooled connection in time."""


class PostgresStore:
    """Every role of the store in one PostgreSQL schema shared by every replica."""

    def __init__(self, url: str, keys: ChainKeys | None = None) -> None:
        self.config = parse_url(url)
        self.lease = self.config.lease
        self._keys = keys or ChainKeys.ephemeral()
        timeout_ms = str(int(self.config.timeout * 1000))
        settings = {"search_path": self.config.schema, "statement_timeout": timeout_ms, "lock_timeout": timeout_ms}

        returned: dict[int, float] = {}

        async def configure(conn: Conn) -> None:
            for name, value in settings.items():
                await conn.execute("SELECT set_config(%s, %s, false)", [name, value])

        async def check(conn: Conn) -> None:
            # A connection idle for a while may have outlived its server (a restart): one round trip finds out,
            # and the pool replaces it instead of failing the call. One in steady use skips that round trip.
            if time.monotonic() - returned.pop(id(conn), 0.0) > CHECK_IDLE_SECONDS:
                await AsyncConnectionPool.check_connection(conn)

        async def reset(conn: Conn) -> None:
            returned[id(conn)] = time.monotonic()

        self._pool: AsyncConnectionPool[Conn] = AsyncConnectionPool(
            self.config.conninfo,
            open=False,
            min_size=1,
            max_size=self.config.pool_max,
            kwargs={"autocommit": True},
            configure=configure,
            check=check,
            reset=reset,
            timeout=self.config.timeout,
            name=f"gateway-store-{self.config.schema}",
        )
        self._opened = False
        self._opening = anyio.Lock()
        self._purged_at = 0.0
        self._locks = LeasedLocks(_Leases(self), self.lease, "postgres-store")

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[Conn]:
        """A pooled connection for one operation, within ``timeout``; StoreUnavailable when the server fails."""
        try:
            with anyio.fail_after(self.config.timeout):
                if not self._opened:
                    async with self._opening:
                        if not self._opened:
                            await self._pool.open(wait=False)
                            self._opened = True
                async with self._pool.connection() as conn:
                    yield conn
        except UNREACHABLE as exc:
            log.warning("the PostgreSQL store cannot be reached: %s", type(exc).__name__)
            raise StoreUnavailable(f"the PostgreSQL store cannot be reached ({type(exc).__name__})") from exc

    async def _transaction(self, steps: Callable[[Conn], Awaitable[T]]) -> T:
        """Run ``steps`` in one transaction: committed if it returns, rolled back if it raises."""
        async with self._connection() as conn, conn.transaction():
            return await steps(conn)

    async def _one(self, query: Any, params: Any = None) -> tuple[Any, ...] | None:
        """The first row of one statement, run on its own (autocommit)."""
        async with self._connection() as conn:
            return await (await conn.execute(query, params)).fetchone()

    async def _rows(self, query: Any, params: Any = None) -> list[tuple[Any, ...]]:
        async with self._connection() as conn:
            return await (await conn.execute(query, params)).fetchall()

    async def _count(self, query: Any, params: Any = None) -> int:
        """The rows one statement changed."""
        async with self._connection() as conn:
            return (await conn.execute(query, params)).rowcount

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
        async with self._connection() as conn:
            return await _plan(conn, plan_id, now)

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
            stored = await _append_in(conn, entry, self._keys) if entry is not None else None
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

    async def consume_plan(self, plan_id: str) -> bool:
        return await self._count("DELETE FROM plans WHERE plan_id = %s AND in_use_by IS NULL", [plan_id]) == 1

    async def use_nonce(self, nonce: str, now: float, ttl: float) -> bool:
        first = await self._one(
            "INSERT INTO nonces AS n (nonce, purge_at) VALUES (%s, %s) ON CONFLICT (nonce) DO UPDATE"
            " SET purge_at = EXCLUDED.purge_at WHERE n.purge_at < %s RETURNING 1",
            [nonce, now + ttl, now],
        )
        return first is not None

    async def serve_from(self, holder: str) -> None:
        return None  # replicas share the store by design: locks, claims and recovery are fenced per key

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

    def lock(self, target: str) -> AbstractAsyncContextManager[None]:
        return self._locks.hold(target)

    async def take_token(self, bucket: str, per_second: float, burst: int, now: float) -> float:
        # On the database's clock (``now`` is this process's): every replica refills the bucket alike.
        full = burst / per_second + 1
        row = await self._one(TAKE_TOKEN, {"name": bucket, "rate": per_second, "burst": float(burst), "full": full})
        return float(row[0]) if row is not None else 0.0

    async def append_audit(self, entry: AuditEntry) -> AuditEntry:
        return await self._transaction(lambda conn: _append_in(conn, entry, self._keys))

    async def trim_audit(self, before: float, now: float) -> AuditEntry | None:
        async def steps(conn: Conn) -> AuditEntry | None:
            await conn.execute("SELECT one FROM audit_tail FOR UPDATE")
            # The oldest entries up to the first one at or after ``before``: a prefix, so the rest stays one chain.
            row = await (
                await conn.execute(
                    "SELECT coalesce((SELECT min(seq) FROM audit WHERE at >= %s), (SELECT max(seq) + 1 FROM audit))",
                    [before],
                )
            ).fetchone()
            cut = row[0] if row is not None else None
            last = await (
                await conn.execute("SELECT entry FROM audit WHERE seq < %s ORDER BY seq DESC LIMIT 1", [cut])
            ).fetchone()
            if cut is None or last is None:
                return None
            tail = await _tail(conn)  # the checkpoint chains after the newest entry, even when every entry goes
            count = (await conn.execute("DELETE FROM audit WHERE seq < %s", [cut])).rowcount
            stored = sealed(checkpoint(codec.load(AuditEntry, last[0]), count, before, now), tail, self._keys)
            await conn.execute(INSERT_AUDIT, _audit_row(stored))
            return stored

        return await self._transaction(steps)

    async def audit_entries(self) -> AsyncIterator[AuditEntry]:
        after = -1
        while True:
            page = await self._rows(
                "SELECT seq, entry FROM audit WHERE seq > %s ORDER BY seq LIMIT %s", [after, AUDIT_PAGE]
            )
            for seq, body in page:
                after = seq
                yield codec.load(AuditEntry, body)
            if len(page) < AUDIT_PAGE:
                return

    async def count_write(self, scopes: list[str], now: float) -> None:
        async def steps(conn: Conn) -> None:
            await conn.execute(
                "DELETE FROM writes WHERE scope = ANY(%s) AND at <= %s", [scopes, now - WRITE_WINDOWS["day"]]
            )
            await conn.execute("INSERT INTO writes (scope, at) SELECT unnest(%s::text[]), %s", [scopes, now])

        await self._transaction(steps)

    async def recent_writes(self, scopes: list[str], now: float) -> dict[str, dict[str, int]]:
        windows = ", ".join(f"count(*) FILTER (WHERE at > %(now)s - {seconds!r})" for seconds in WRITE_WINDOWS.values())
        rows = await self._rows(
            f"SELECT scope, {windows} FROM writes WHERE scope = ANY(%(scopes)s) AND at <= %(now)s"
            f" AND at > %(now)s - {max(WRITE_WINDOWS.values())!r} GROUP BY scope",
            {"scopes": scopes, "now": now},
        )
        counts = {scope: dict.fromkeys(WRITE_WINDOWS, 0) for scope in scopes}
        for scope, *found in rows:
            counts[scope] = {window: int(count) for window, count in zip(WRITE_WINDOWS, found, strict=True)}
        return counts

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

    async def close(self) -> None:
        if self._opened:
            await self._pool.close()
            self._opened = False

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

    async def _purge(self, conn: Conn, now: float) -> None:
        """Delete lapsed plans; every PURGE_EVERY seconds, whatever else lapsed too."""
        await conn.execute("DELETE FROM plans WHERE purge_at < %s", [now])
        if time.monotonic() - self._purged_at < PURGE_EVERY:
            return
        self._purged_at = time.monotonic()
        await conn.execute("DELETE FROM idempotency WHERE purge_at < %s AND state <> 'in_flight'", [now])
        await conn.execute("DELETE FROM nonces WHERE purge_at < %s", [now])
        await conn.execute("DELETE FROM approvals WHERE purge_at < %s", [now])
        await conn.execute("DELETE FROM writes WHERE at <= %s", [now - WRITE_WINDOWS["day"]])
        await conn.execute("DELETE FROM buckets WHERE purge_at < extract(epoch FROM clock_timestamp())")


class _Leases:
    """The lock's atomic steps as statements (gateway.stores.leases.LeaseSteps).

    Taking and freeing a lock commit without waiting for the disk (``synchronous_commit`` off for that one
    transaction), which saves two fsyncs per write: the WAL is flushed in order, so the claim's own (durable)
    commit makes the lock that fenced it durable too; a server crash can lose only a lock nothing was claimed
    under (its holder's claim is then refused by the fence) or a release (the lock lapses with its lease). A
    renewal waits for the disk: losing one could shorten a lease under a write in flight."""

    def __init__(self, store: PostgresStore) -> None:
        self._store = store

    async def acquire(self, target: str, nonce: str, lease_ms: int) -> str | None:
        params = {"target": target, "nonce": nonce, "lease": lease_ms}
        row = await self._store._transaction(lambda conn: _undurable(conn, ACQUIRE, params))
        return str(row[0]) if row is not None else None

    async def renew(self, target: str, token: str, lease_ms: int) -> bool:
        return await self._store._count(RENEW, {"target": target, "token": token, "lease": lease_ms}) == 1

    async def unlock(self, target: str, token: str) -> None:
        await self._store._transaction(lambda conn: _undurable(conn, UNLOCK, [target, token]))


async def _undurable(conn: Conn, query: Any, params: Any) -> tuple[Any, ...] | None:
    """Run one statement in the caller's transaction, whose commit does not wait for the disk; its first row."""
    await conn.execute("SELECT set_config('synchronous_commit', 'off', true)")
    cursor = await conn.execute(query, params)
    return await cursor.fetchone() if cursor.description is not None else None


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


async def _append_in(conn: Conn, entry: AuditEntry, keys: ChainKeys) -> AuditEntry:
    """Seal ``entry`` after the chain's tail and insert it, inside the caller's transaction."""
    await conn.execute("SELECT one FROM audit_tail FOR UPDATE")
    stored = sealed(entry, await _tail(conn), keys)
    await conn.execute(INSERT_AUDIT, _audit_row(stored))
    return stored


async def _tail(conn: Conn) -> AuditEntry | None:
    row = await (await conn.execute("SELECT entry FROM audit ORDER BY seq DESC LIMIT 1")).fetchone()
    return codec.load(AuditEntry, row[0]) if row is not None else None


def _audit_row(entry: AuditEntry) -> list[Any]:
    """The audit table's columns for a sealed entry: the plain ones for queries, then the entry itself."""
    return [
        entry.seq,
        entry.at,
        entry.caller,
        entry.tool,
        entry.outcome,
        entry.code,
        entry.target,
        entry.plan_id,
        entry.idempotency_key,
        codec.dump(entry),
    ]


def _record(row: tuple[Any, ...] | None) -> KeyRecord | None:
    """A KeyRecord from its row (body, state, owner, ...); the state column wins over the body's copy."""
    return None if row is None else codec.load(KeyRecord, row[0], state=row[1])
