"""The shared store: several gateway replicas keep plans, keys, nonces, locks and the audit in one Redis.

``store = "redis://[user:password@]host:6379/0?lock_lease=60&prefix=gateway:"`` (``rediss://`` for TLS), or
``redis+sentinel://h1:26379,h2:26379,h3:26379/SERVICE/0?...``; gateway/stores/redis_url.py says which query
parameters are ours and which redis-py's. Use one Redis primary (standalone, or failed over by Sentinel), not
Redis Cluster: a claim's script touches several keys. Records are JSON written and read by the one codec of
every store (gateway/stores/codec.py: unknown fields dropped, so replicas of two versions share records).

Keys, under ``prefix``::

    plan:<planId>          hash    body, expires_at, in_use_by       expires an hour after the plan (tombstone)
    key:<caller>:<key>     hash    body, state, owner                expires after the retention
    nonce:<nonce>          string                                    SET NX PX: single use within its TTL
    lock:<target>          string  "<fence>:<random>" of the holder  SET PX lease, renewed while held
    fence:<target>         integer                                   INCR on every acquire, never reset
    audit                  list    one AuditEntry JSON per decision  RPUSH; trim: LTRIM + checkpoint, one MULTI
    approval:<id>          hash    body, rev                         expires an hour after the plan would
    approvals              zset    approval ids by expiry            the approval page's list; trimmed on read
    writes:<scope>         zset    one member per write, by time     blast-radius counters; trimmed to a day
    task:<id>              hash    body, rev, status                 an MCP task; expires with the task
    taskkey:<caller>:<key> string  the task id of a live task        SET with the task (create_task's script)
    tasks                  zset    task ids by expiry                what a gateway resumes; trimmed on read
    session:<id>           string  an ApproverSession's JSON         SET PX: expires with the session
    sessions               zset    session keys by expiry            the operator's list; trimmed on read
    bucket:<name>          hash    tokens, updated                   a rate-limit bucket (Lua, Redis's clock);
                                                                     expires once it would be full again

Atomicity. Each decision that reads and writes is one Lua script, which Redis runs without interleaving:
``claim`` checks the key record, the holder's lock and the plan (live, not in use), then inserts the record in
flight and marks the plan in use, exactly like the SQLite transaction; ``release``, ``settle``,
``consume_plan`` (delete a plan only while no key holds it), ``create_task`` (only while no live task holds the
caller's key), ``replace`` (an approval, only at the revision read), ``replace_task`` (the same, and only from a
status TASK_TRANSITIONS lets the new one follow: it is passed ``task_leaves``), acquire, renew and unlock are
scripts too. A script retried after a lost reply recognises its own earlier effect. The scripts that change a
key's state (claim, release, settle, orphan) change it only from the states KEY_TRANSITIONS (gateway.records) lets
their event leave, which they are passed (``absent``: no record); anything else leaves the key as it was.

Locks, leases and fencing. ``lock(target)`` sets the target's lock key only if it is absent, with a lease and
a token: the target's fence (a counter incremented on every acquire, so a token is never issued twice) and a
random part. Waiters poll with a short backoff. A background task renews the lease every third of it while the
body runs; unlock deletes the key only if the token is still the holder's (the loop around these scripts is
gateway/stores/leases.py, shared with PostgreSQL). The token is remembered for the task (a context variable); a
token that is no longer the lock's value is a stale fence, and:

- ``claim`` refuses unless the lock is still held with that token. A holder that stalled past its lease (and
  so may have been overtaken by another replica) gets ``request_in_progress`` and writes nothing.
- A claimed key records its owner token. While the owner holds the lock, the key reads as in flight. Once the
  lock is gone or held by someone else while the key is still in flight, the owner died or stalled mid-write:
  the next read settles the key as ``unknown`` (and deletes the plan), so the caller gets ``outcome_unknown``
  and the key never writes again.
- ``settle`` records an outcome only over the owner's own in-flight record; a stalled owner that wakes up
  after its key was declared unknown cannot overwrite that. The store remembers the claims it made (their
  tokens) until they are settled or released, so an outcome the store could not take at once (kept by
  gateway.write.outcome) settles its own claim when a later call stores it, its lock gone by then, unless a read
  found the key orphaned first. When the entry was stored and the key's outcome was not, ``settle`` raises
  OutcomeNotRecorded: the outcome is kept without its entry, which is never stored twice.
- ``recover_in_flight`` at start-up applies the same rule to every key. It cannot settle everything in flight
  as SQLite does: the other replicas are still running.

Replication. A claim is followed on the same connection by ``WAIT min_replicas replica_wait`` (1 replica by
default with Sentinel): a claim no replica acknowledged in time is released and the call refused, so a failover
to a replica cannot lose a claim whose write was then sent. Settles and audit entries are not waited for: one
lost in a failover leaves the key in flight, which reads ``unknown`` once its lock lapses.

Guarantee: one key never reaches the backend twice (the claim is atomic, replicated before the call, and a
claimed key never returns to free unless its call was never sent). For one target, writes through gateways are
serialised by the lock and the version re-check under it, as long as a holder's write finishes while it holds
the lease: a live holder renews it, and the lease (default 60 s) must exceed the longest write timeout by more
than 5 s (``check`` and ``serve`` refuse a config where it does not), so that the write of a holder that died
mid-call has landed or failed before another replica can take the target. The store cannot
stop a write already sent: the legacy backend takes no fence token, so a holder stalled between its claim and
its backend call for longer than the lease could still race the next holder. Durability is Redis's: use AOF
(docs/deployment.md) or a restart forgets keys.

Connection loss fails closed: every operation raises StoreUnavailable, which the write path turns into a
refusal before anything is sent; redis-py reconnects on the next call. A Redis that stops answering with its
connections open (paused) fails the same way within ``socket_timeout`` times ``1 + retries`` (1 s and 2 by
default). Lock release and renewal never raise. The audit entry of a write's outcome is appended just before its
settle (a Lua script cannot compute the chain's HMAC), so a crash in between leaves the entry and a key in
flight that later reads ``unknown``.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import secrets
from collections.abc import AsyncIterator, Awaitable
from contextlib import AbstractAsyncContextManager
from typing import Any, TypeVar, cast
from urllib.parse import quote

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import OutOfMemoryError, ReadOnlyError, WatchError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.typing import EncodableT, FieldT

from gateway.audit.chain import ChainKeys, checkpoint, sealed
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
from gateway.stores.base import OutcomeNotRecorded, StoreUnavailable, key_leaves, task_leaves
from gateway.stores.leases import LeasedLocks
from gateway.stores.redis_url import parse_url

log = logging.getLogger(__name__)

AUDIT_PAGE = 500
# A Redis that is down, unreachable, full (maxmemory with noeviction) or demoted to a read-only replica.
UNREACHABLE = (RedisConnectionError, RedisTimeoutError, OutOfMemoryError, ReadOnlyError)

T = TypeVar("T")

# KEYS: record, plan, lock. ARGV: body, now, retention ms, owner token ('' outside a lock), idempotency key,
# the states a claim may take a key from (key_leaves, space-delimited).
# A token bucket every replica shares: {tokens, updated} refilled by elapsed time on Redis's own clock.
# KEYS: bucket. ARGV: per_second, burst. Returns 0, or the seconds (as a string) until a token is free.
TAKE_TOKEN = """
local rate, burst = tonumber(ARGV[1]), tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local state = redis.call('HMGET', KEYS[1], 'tokens', 'updated')
local tokens, updated = tonumber(state[1]) or burst, tonumber(state[2]) or now
tokens = math.min(burst, tokens + math.max(0, now - updated) * rate)
local wait = 0
if tokens >= 1 then tokens = tokens - 1 else wait = (1 - tokens) / rate end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'updated', tostring(now))
redis.call('PEXPIRE', KEYS[1], math.ceil(burst / rate * 1000) + 1000)
return tostring(wait)
"""

CLAIM = """
local record = redis.call('HMGET', KEYS[1], 'body', 'state', 'owner')
if not string.find(ARGV[6], ' ' .. (record[2] or 'absent') .. ' ', 1, true) then
  if record[2] == 'in_flight' and ARGV[4] ~= '' and record[3] == ARGV[4]
      and redis.call('HGET', KEYS[2], 'in_use_by') == ARGV[5] then
    return {'claimed'}
  end
  return {'existing', record[1], record[2], record[3]}
end
if ARGV[4] ~= '' and redis.call('GET', KEYS[3]) ~= ARGV[4] then
  return {'fenced'}
end
local plan = redis.call('HMGET', KEYS[2], 'expires_at', 'in_use_by')
if not plan[1] or tonumber(ARGV[2]) >= tonumber(plan[1]) or plan[2] then
  return {'busy'}
end
redis.call('HSET', KEYS[1], 'body', ARGV[1], 'state', 'in_flight', 'owner', ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('HSET', KEYS[2], 'in_use_by', ARGV[5])
return {'claimed'}
"""

# KEYS: record, plan, lock. ARGV: the owner token seen in flight, the states a key may become unknown from.
ORPHAN = """
local record = redis.call('HMGET', KEYS[1], 'body', 'state', 'owner')
if string.find(ARGV[2], ' ' .. (record[2] or 'absent') .. ' ', 1, true) and ARGV[1] ~= '' and record[3] == ARGV[1]
    and redis.call('GET', KEYS[3]) ~= ARGV[1] then
  redis.call('HSET', KEYS[1], 'state', 'unknown')
  redis.call('DEL', KEYS[2])
  record[2] = 'unknown'
end
return record
"""

# KEYS: record, plan. ARGV: owner token, idempotency key, the states a release may take a key from.
RELEASE = """
local record = redis.call('HMGET', KEYS[1], 'state', 'owner')
if string.find(ARGV[3], ' ' .. (record[1] or 'absent') .. ' ', 1, true) and record[2] == ARGV[1] then
  redis.call('DEL', KEYS[1])
end
if redis.call('HGET', KEYS[2], 'in_use_by') == ARGV[2] then
  redis.call('HDEL', KEYS[2], 'in_use_by')
end
return 1
"""

# KEYS: record, plan. ARGV: state, body, owner token, the states this outcome may follow. The same outcome again
# is a script retried after a lost reply.
SETTLE = """
local record = redis.call('HMGET', KEYS[1], 'state', 'owner')
redis.call('DEL', KEYS[2])
if record[2] ~= ARGV[3]
    or (not string.find(ARGV[4], ' ' .. (record[1] or 'absent') .. ' ', 1, true) and record[1] ~= ARGV[1]) then
  return 0
end
redis.call('HSET', KEYS[1], 'state', ARGV[1], 'body', ARGV[2])
return 1
"""

# KEYS: plan.
CONSUME = """
if redis.call('HEXISTS', KEYS[1], 'body') == 1 and redis.call('HEXISTS', KEYS[1], 'in_use_by') == 0 then
  return redis.call('DEL', KEYS[1])
end
return 0
"""

# KEYS: approval, index. ARGV: body, rev, expires_at, purge at (ms since the epoch). Returns the stored body.
PUT_APPROVAL = """
local body = redis.call('HGET', KEYS[1], 'body')
if body then
  return body
end
redis.call('HSET', KEYS[1], 'body', ARGV[1], 'rev', ARGV[2])
redis.call('PEXPIREAT', KEYS[1], ARGV[4])
redis.call('ZADD', KEYS[2], ARGV[3], KEYS[1])
return ARGV[1]
"""

# KEYS: an approval. ARGV: the rev it was read at, the new body. Returns 1 when replaced.
REPLACE = """
if redis.call('HGET', KEYS[1], 'rev') ~= ARGV[1] then
  return 0
end
redis.call('HSET', KEYS[1], 'body', ARGV[2], 'rev', tostring(tonumber(ARGV[1]) + 1))
return 1
"""

# KEYS: a task. ARGV: the rev it was read at, the new body, its status, the statuses it may follow (task_leaves,
# space-delimited). Returns 1 when replaced.
REPLACE_TASK = """
local stored = redis.call('HMGET', KEYS[1], 'rev', 'status')
if stored[1] ~= ARGV[1] or not stored[2] or not string.find(ARGV[4], ' ' .. stored[2] .. ' ', 1, true) then
  return 0
end
redis.call('HSET', KEYS[1], 'body', ARGV[2], 'rev', tostring(tonumber(ARGV[1]) + 1), 'status', ARGV[3])
return 1
"""

# KEYS: task, the (caller, key)'s task name, index. ARGV: body, task id, expires_at, expiry (ms since the epoch),
# the terminal statuses (" completed failed cancelled "), its status. Returns the stored body (this task's, or a
# live one's for the same caller and key).
CREATE_TASK = """
local other = redis.call('GET', KEYS[2])
if other then
  local status = redis.call('HGET', other, 'status')
  if status and not string.find(ARGV[5], ' ' .. status .. ' ', 1, true) then
    return redis.call('HGET', other, 'body')
  end
end
redis.call('HSET', KEYS[1], 'body', ARGV[1], 'rev', '0', 'status', ARGV[6])
redis.call('PEXPIREAT', KEYS[1], ARGV[4])
redis.call('SET', KEYS[2], KEYS[1], 'PXAT', ARGV[4])
redis.call('ZADD', KEYS[3], ARGV[3], KEYS[1])
return ARGV[1]
"""

# KEYS: lock, fence. ARGV: this acquirer's random part, lease ms.
ACQUIRE = """
local holder = redis.call('GET', KEYS[1])
if holder then
  if string.sub(holder, -(#ARGV[1] + 1)) == ':' .. ARGV[1] then
    return holder
  end
  return false
end
local token = redis.call('INCR', KEYS[2]) .. ':' .. ARGV[1]
redis.call('SET', KEYS[1], token, 'PX', ARGV[2])
return token
"""

# KEYS: lock. ARGV: token, lease ms.
RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""

# KEYS: lock. ARGV: token.
UNLOCK = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""


class RedisStore:
    """Plans, keys, nonces, locks and the audit in one Redis shared by every replica."""

    def __init__(self, url: str, keys: ChainKeys | None = None) -> None:
        self.config = parse_url(url)
        self.lease, self.prefix = self.config.lease, self.config.prefix
        self._keys = keys or ChainKeys.ephemeral()
        # Fail closed within seconds when Redis is gone or stalled: a socket timeout (parse_url's default) and a
        # few quick retries, rather than redis-py's wait forever.
        retry = Retry(ExponentialWithJitterBackoff(base=0.01, cap=0.2), retries=self.config.retries)
        self._sentinel: Sentinel | None = None
        if self.config.sentinels:
            options = _socket_options(self.config.options)
            self._sentinel = Sentinel(self.config.sentinels, sentinel_kwargs=options)  # type: ignore[no-untyped-call,unused-ignore]  # typed from redis 8.2
            self._redis: aioredis.Redis = self._sentinel.master_for(
                self.config.service,
                decode_responses=True,
                retry=retry,
                db=self.config.db,
                username=self.config.username,
                password=self.config.password,
                **self.config.options,
            )
        else:
            self._redis = aioredis.Redis.from_url(self.config.url, decode_responses=True, retry=retry)
        self._scripts = {
            name: self._redis.register_script(text)
            for name, text in [
                ("take_token", TAKE_TOKEN),
                ("claim", CLAIM),
                ("orphan", ORPHAN),
                ("release", RELEASE),
                ("settle", SETTLE),
                ("consume", CONSUME),
                ("acquire", ACQUIRE),
                ("renew", RENEW),
                ("unlock", UNLOCK),
                ("put_approval", PUT_APPROVAL),
                ("replace", REPLACE),
                ("replace_task", REPLACE_TASK),
                ("create_task", CREATE_TASK),
            ]
        }
        self._locks = LeasedLocks(_Leases(self), self.lease, "redis-store")

    async def put_plan(self, plan: Plan, now: float) -> None:
        key = self._plan_key(plan.plan_id)
        fields: dict[FieldT, EncodableT] = {"body": codec.dump(plan), "expires_at": repr(plan.expires_at)}
        if plan.in_use_by is not None:
            fields["in_use_by"] = plan.in_use_by
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.delete(key)
            pipe.hset(key, mapping=fields)
            pipe.pexpireat(key, int((plan.expires_at + TOMBSTONE_SECONDS) * 1000))
            await self._call(pipe.execute())

    async def get_plan(self, plan_id: str, now: float) -> Plan | Expired | None:
        fields = await self._call(self._redis.hgetall(self._plan_key(plan_id)))
        if "body" not in fields:
            return None
        plan = codec.load(Plan, cast(str, fields["body"]), in_use_by=fields.get("in_use_by"))
        return Expired(plan.caller) if now >= plan.expires_at else plan

    async def get_record(self, caller: str, key: str) -> KeyRecord | None:
        found = await self._call(self._redis.hmget(self._record_key(caller, key), ["body", "state", "owner"]))
        return await self._unless_orphaned(found)

    async def claim(self, record: KeyRecord, now: float, retention: float) -> Claim:
        keys = [
            self._record_key(record.caller, record.key),
            self._plan_key(record.plan_id),
            self._lock_key(record.target),
        ]
        owner = self._locks.token(record.target)
        args = [codec.dump(record), repr(now), str(max(1, int(retention * 1000))), owner, record.key, _leaves("claim")]
        answer, acknowledged = await self._claim_replicated(keys, args)
        if answer[0] == "claimed" and acknowledged < self.config.min_replicas:
            # Replication is asynchronous: a claim only the primary holds can vanish in a failover, and the key be
            # claimed again. Fail closed before anything is sent.
            await self.release(record)
            raise StoreUnavailable(
                f"the claim reached {acknowledged} of {self.config.min_replicas} Redis replicas in time"
            )
        if answer[0] == "claimed":
            self._locks.claimed(record, owner)
            return Claim(claimed=True)
        if answer[0] == "existing":
            return Claim(claimed=False, existing=await self._unless_orphaned(answer[1:]))
        if answer[0] == "fenced":
            log.warning("lock on %s lapsed before the claim of a key; the key was not claimed", record.target)
        return Claim(claimed=False, plan_busy=True)

    async def _claim_replicated(self, keys: list[str], args: list[str]) -> tuple[Any, int]:
        """The claim script, then (on the same connection, in one pipeline) WAIT for ``min_replicas``."""
        if not self.config.min_replicas:
            return await self._script("claim", keys, args), 0
        async with self._redis.pipeline(transaction=False) as pipe:
            await self._scripts["claim"](keys=keys, args=args, client=pipe)  # queued, sent by execute()
            pipe.execute_command("WAIT", self.config.min_replicas, int(self.config.replica_wait * 1000))
            answer, acknowledged = await self._call(pipe.execute())
        return answer, int(acknowledged)

    async def release(self, record: KeyRecord) -> None:
        keys = [self._record_key(record.caller, record.key), self._plan_key(record.plan_id)]
        await self._script("release", keys, [self._locks.owner(record), record.key, _leaves("release")])
        self._locks.forget(record)

    async def settle(self, record: KeyRecord, entry: AuditEntry | None = None) -> AuditEntry | None:
        # The entry first (a Lua script cannot compute the chain's HMAC): a crash in between leaves the entry and
        # the key in flight, which reads unknown once its lock lapses, so no outcome is ever missing its entry.
        stored = await self.append_audit(entry) if entry is not None else None
        keys = [self._record_key(record.caller, record.key), self._plan_key(record.plan_id)]
        try:
            args = [record.state, codec.dump(record), self._locks.owner(record), _leaves(record.state)]
            settled = await self._script("settle", keys, args)
        except StoreUnavailable as exc:
            if stored is None:
                raise
            # The entry is stored: the outcome is kept without it (gateway.write.outcome), never audited twice.
            raise OutcomeNotRecorded(str(exc), stored) from None
        self._locks.forget(record)
        if not settled:
            log.warning(
                "key %s was no longer this call's in-flight claim (its lock lapsed); its outcome %s was not recorded",
                record.key,
                record.state,
            )
        return stored

    async def consume_plan(self, plan_id: str) -> bool:
        return bool(await self._script("consume", [self._plan_key(plan_id)], []))

    async def use_nonce(self, nonce: str, now: float, ttl: float) -> bool:
        first = await self._call(
            self._redis.set(self.prefix + "nonce:" + nonce, "1", nx=True, px=max(1, int(ttl * 1000)))
        )
        return bool(first)

    async def serve_from(self, holder: str) -> None:
        return None  # replicas share the store by design: locks, claims and recovery are fenced per key

    async def recover_in_flight(self) -> list[KeyRecord]:
        # Other replicas keep running: only keys whose owner no longer holds its lock were left by a crash.
        # Every read applies the same rule, so this start-up sweep only settles them sooner.
        recovered: list[KeyRecord] = []
        try:
            async for name in self._redis.scan_iter(match=_glob_escape(self.prefix) + "key:*", count=500):
                found = await self._call(self._redis.hmget(name, ["body", "state", "owner"]))
                if found[1] != "in_flight":
                    continue
                record = await self._unless_orphaned(found)
                if record is not None and record.state == "unknown":
                    recovered.append(record)
        except (*UNREACHABLE, StoreUnavailable) as exc:
            log.warning("could not sweep keys left in flight (%s); each is settled when next read", exc)
        return recovered

    def lock(self, target: str) -> AbstractAsyncContextManager[None]:
        return self._locks.hold(target)

    async def take_token(self, bucket: str, per_second: float, burst: int, now: float) -> float:
        key = self.prefix + "bucket:" + quote(bucket, safe="")
        return float(await self._script("take_token", [key], [repr(per_second), str(burst)]))

    async def append_audit(self, entry: AuditEntry) -> AuditEntry:
        return await self._call(self._append_chained(entry))

    async def trim_audit(self, before: float, now: float) -> AuditEntry | None:
        return await self._call(self._trim_chained(before, now))

    async def _trim_chained(self, before: float, now: float) -> AuditEntry | None:
        # Like the append: the prefix is read under WATCH, and the trim and its checkpoint are one MULTI.
        name = self.prefix + "audit"
        async with self._redis.pipeline(transaction=True) as pipe:
            while True:
                try:
                    await pipe.watch(name)
                    cut, last, tail = 0, None, None
                    while True:
                        page = await pipe.lrange(name, cut, cut + AUDIT_PAGE - 1)
                        older = [codec.load(AuditEntry, cast(str, body)) for body in page]
                        older = older[: next((n for n, e in enumerate(older) if e.at >= before), len(older))]
                        cut += len(older)
                        last = older[-1] if older else last
                        if len(older) < AUDIT_PAGE:
                            break
                    if last is None:
                        return None  # leaving the pipeline's block unwatches
                    tail_body = await pipe.lindex(name, -1)
                    tail = codec.load(AuditEntry, cast(str, tail_body))
                    stored = sealed(checkpoint(last, cut, before, now), tail, self._keys)
                    pipe.multi()  # type: ignore[no-untyped-call]
                    pipe.ltrim(name, cut, -1)
                    pipe.rpush(name, codec.dump(stored))
                    await pipe.execute()
                    return stored
                except WatchError:
                    continue

    async def _append_chained(self, entry: AuditEntry) -> AuditEntry:
        # Optimistic: read the tail under WATCH, push the sealed entry in MULTI; another replica's push in
        # between aborts the transaction and this one re-reads the new tail.
        name = self.prefix + "audit"
        async with self._redis.pipeline(transaction=True) as pipe:
            while True:
                try:
                    await pipe.watch(name)
                    tail = await pipe.lindex(name, -1)
                    last = codec.load(AuditEntry, cast(str, tail)) if tail is not None else None
                    stored = sealed(entry, last, self._keys)
                    pipe.multi()  # type: ignore[no-untyped-call]
                    pipe.rpush(name, codec.dump(stored))
                    await pipe.execute()
                    return stored
                except WatchError:
                    continue

    async def audit_entries(self) -> AsyncIterator[AuditEntry]:
        start = 0
        while True:
            page = await self._call(self._redis.lrange(self.prefix + "audit", start, start + AUDIT_PAGE - 1))
            for body in page:
                yield codec.load(AuditEntry, cast(str, body))
            if len(page) < AUDIT_PAGE:
                return
            start += AUDIT_PAGE

    async def count_write(self, scopes: list[str], now: float) -> None:
        day = WRITE_WINDOWS["day"]
        async with self._redis.pipeline(transaction=True) as pipe:
            for scope in scopes:
                name = self._writes_key(scope)
                pipe.zadd(name, {f"{now!r}:{secrets.token_hex(6)}": now})
                pipe.zremrangebyscore(name, "-inf", repr(now - day))
                pipe.expire(name, int(day) + 60)
            await self._call(pipe.execute())

    async def recent_writes(self, scopes: list[str], now: float) -> dict[str, dict[str, int]]:
        async with self._redis.pipeline(transaction=False) as pipe:
            for scope in scopes:
                for seconds in WRITE_WINDOWS.values():
                    pipe.zcount(self._writes_key(scope), f"({now - seconds!r}", repr(now))
            found = await self._call(pipe.execute())
        counts = iter(int(count) for count in found)
        return {scope: {window: next(counts) for window in WRITE_WINDOWS} for scope in scopes}

    async def put_approval(self, approval: Approval) -> Approval:
        purge_ms = int((approval.expires_at + TOMBSTONE_SECONDS) * 1000)
        args = [codec.dump(approval), str(approval.rev), repr(approval.expires_at), str(purge_ms)]
        stored = await self._script("put_approval", [self._approval_key(approval.approval_id), self._approvals], args)
        return codec.load(Approval, cast(str, stored))

    async def get_approval(self, approval_id: str) -> Approval | None:
        body = await self._call(self._redis.hget(self._approval_key(approval_id), "body"))
        return codec.load(Approval, cast(str, body)) if body is not None else None

    async def replace_approval(self, approval: Approval) -> bool:
        changed = codec.dump(dataclasses.replace(approval, rev=approval.rev + 1))
        return bool(
            await self._script("replace", [self._approval_key(approval.approval_id)], [str(approval.rev), changed])
        )

    async def open_approvals(self, now: float) -> list[Approval]:
        found = [
            codec.load(Approval, body) for body in await self._indexed(self._approvals, now, now - TOMBSTONE_SECONDS)
        ]
        return sorted(found, key=lambda approval: approval.requested_at, reverse=True)

    async def create_task(self, task: Task) -> Task:
        name = self._task_key(task.task_id)
        expiry_ms = str(int(task.expires_at * 1000))
        terminal = " " + " ".join(sorted(TERMINAL)) + " "
        args = [codec.dump(task), task.task_id, repr(task.expires_at), expiry_ms, terminal, task.status]
        stored = await self._script("create_task", [name, self._task_of_key(task.caller, task.key), self._tasks], args)
        return codec.load(Task, cast(str, stored))

    async def get_task(self, task_id: str) -> Task | None:
        body = await self._call(self._redis.hget(self._task_key(task_id), "body"))
        return codec.load(Task, cast(str, body)) if body is not None else None

    async def replace_task(self, task: Task) -> bool:
        changed = codec.dump(dataclasses.replace(task, rev=task.rev + 1))
        args = [str(task.rev), changed, task.status, " " + " ".join(task_leaves(task.status)) + " "]
        return bool(await self._script("replace_task", [self._task_key(task.task_id)], args))

    async def live_tasks(self, now: float) -> list[Task]:
        found = [codec.load(Task, body) for body in await self._indexed(self._tasks, now, now)]
        return sorted((task for task in found if not task.terminal), key=lambda task: task.created_at)

    async def _indexed(self, index: str, after: float, trim_before: float) -> list[str]:
        """The bodies of the hashes an expiry index names with an expiry after ``after``, once the index is trimmed
        of names that expired before ``trim_before``."""
        await self._call(self._redis.zremrangebyscore(index, "-inf", repr(trim_before)))
        names = await self._call(self._redis.zrangebyscore(index, f"({after!r}", "+inf"))
        if not names:
            return []
        async with self._redis.pipeline(transaction=False) as pipe:
            for name in names:
                pipe.hget(cast(str, name), "body")
            bodies = await self._call(pipe.execute())
        return [cast(str, body) for body in bodies if body is not None]

    async def put_session(self, session: ApproverSession) -> None:
        key = self._session_key(session.session_id)
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.set(key, codec.dump(session), pxat=int(session.expires_at * 1000))
            pipe.zadd(self._sessions, {key: session.expires_at})
            await self._call(pipe.execute())

    async def get_session(self, session_id: str, now: float) -> ApproverSession | None:
        body = await self._call(self._redis.get(self._session_key(session_id)))
        found = codec.load(ApproverSession, cast(str, body)) if body is not None else None
        return found if found is not None and found.expires_at > now else None

    async def delete_session(self, session_id: str) -> bool:
        key = self._session_key(session_id)
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.delete(key)
            pipe.zrem(self._sessions, key)
            deleted, _ = await self._call(pipe.execute())
        return bool(deleted)

    async def sessions(self, now: float) -> list[ApproverSession]:
        await self._call(self._redis.zremrangebyscore(self._sessions, "-inf", repr(now)))
        names = await self._call(self._redis.zrangebyscore(self._sessions, f"({now!r}", "+inf"))
        bodies = await self._call(self._redis.mget([cast(str, name) for name in names])) if names else []
        found = [codec.load(ApproverSession, cast(str, body)) for body in bodies if body is not None]
        return sorted(found, key=lambda session: session.created_at, reverse=True)

    async def close(self) -> None:
        await self._redis.aclose()
        for sentinel in self._sentinel.sentinels if self._sentinel is not None else []:
            await sentinel.aclose()

    async def _unless_orphaned(self, fields: list[Any]) -> KeyRecord | None:
        """A record from [body, state, owner]; an in-flight one whose owner lost its lock is settled unknown."""
        record, owner = _record(fields), fields[2]
        if record is None or record.state != "in_flight" or not owner:
            return record
        keys = [
            self._record_key(record.caller, record.key),
            self._plan_key(record.plan_id),
            self._lock_key(record.target),
        ]
        return _record(await self._script("orphan", keys, [owner, _leaves("unknown")]))

    def _plan_key(self, plan_id: str) -> str:
        return self.prefix + "plan:" + plan_id

    def _record_key(self, caller: str, key: str) -> str:
        # The caller is quoted so that a ':' in it cannot make two (caller, key) pairs share a name.
        return self.prefix + "key:" + quote(caller, safe="") + ":" + key

    def _writes_key(self, scope: str) -> str:
        return self.prefix + "writes:" + quote(scope, safe="")

    def _approval_key(self, approval_id: str) -> str:
        return self.prefix + "approval:" + approval_id

    def _session_key(self, session_id: str) -> str:
        return self.prefix + "session:" + quote(session_id, safe="")

    @property
    def _sessions(self) -> str:
        return self.prefix + "sessions"

    @property
    def _approvals(self) -> str:
        return self.prefix + "approvals"

    def _task_key(self, task_id: str) -> str:
        return self.prefix + "task:" + task_id

    def _task_of_key(self, caller: str, key: str) -> str:
        return self.prefix + "taskkey:" + quote(caller, safe="") + ":" + key

    @property
    def _tasks(self) -> str:
        return self.prefix + "tasks"

    def _lock_key(self, target: str) -> str:
        return self.prefix + "lock:" + quote(target, safe="")

    async def _script(self, name: str, keys: list[str], args: list[str]) -> Any:
        return await self._call(self._scripts[name](keys=keys, args=args))

    async def _call(self, operation: Awaitable[T]) -> T:
        try:
            return await operation
        except UNREACHABLE as exc:
            log.warning("the Redis store cannot be reached: %s: %s", type(exc).__name__, exc)
            raise StoreUnavailable(f"the Redis store cannot be reached ({type(exc).__name__})") from exc


class _Leases:
    """The lock's atomic steps as scripts (gateway.stores.leases.LeaseSteps)."""

    def __init__(self, store: RedisStore) -> None:
        self._store = store

    async def acquire(self, target: str, nonce: str, lease_ms: int) -> str | None:
        fence = self._store.prefix + "fence:" + quote(target, safe="")
        token = await self._store._script("acquire", [self._store._lock_key(target), fence], [nonce, str(lease_ms)])
        return str(token) if token else None

    async def renew(self, target: str, token: str, lease_ms: int) -> bool:
        return bool(await self._store._script("renew", [self._store._lock_key(target)], [token, str(lease_ms)]))

    async def unlock(self, target: str, token: str) -> None:
        await self._store._script("unlock", [self._store._lock_key(target)], [token])


def _socket_options(options: dict[str, Any]) -> dict[str, Any]:
    """The timeouts that also apply to asking the sentinels."""
    return {name: value for name, value in options.items() if name.startswith("socket_")}


def _glob_escape(text: str) -> str:
    return re.sub(r"([*?\[\]\\])", r"\\\1", text)


def _leaves(event: str) -> str:
    """KEY_TRANSITIONS's states ``event`` may take a key from, as the scripts read them: ``' in_flight '``."""
    return " " + " ".join(key_leaves(event)) + " "


def _record(fields: list[Any]) -> KeyRecord | None:
    """A KeyRecord from its hash fields [body, state, owner]; the state field wins over the body's copy."""
    body, state = fields[0], fields[1]
    if body is None or state is None:
        return None
    return codec.load(KeyRecord, cast(str, body), state=state)
