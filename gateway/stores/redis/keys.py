"""The Redis store's keys: ``plan:``, ``key:`` and ``nonce:``, and the leased per-target locks (``lock:``,
``fence:``: gateway.stores.redis.leases). Each step that reads and writes a key is one Lua script: claim, release,
settle, orphan (an in-flight key whose owner lost its lock becomes ``unknown``) and consume. The scripts that change
a key's state are passed the states KEY_TRANSITIONS lets their event leave (``key_leaves``), and a token that is no
longer its lock's is refused (the package docstring says how the fencing works)."""

from __future__ import annotations

import logging
import re
from contextlib import AbstractAsyncContextManager
from typing import Any, cast
from urllib.parse import quote

from redis.typing import EncodableT, FieldT

from gateway.audit.chain import ChainKeys
from gateway.records import TOMBSTONE_SECONDS, AuditEntry, Claim, Expired, KeyRecord, Plan
from gateway.stores import codec
from gateway.stores.base import OutcomeNotRecorded, StoreUnavailable, key_leaves
from gateway.stores.leases import LeasedLocks
from gateway.stores.redis.audit import append_chained
from gateway.stores.redis.client import UNREACHABLE, RedisClient
from gateway.stores.redis.leases import RedisLeases, lock_key

log = logging.getLogger(__name__)

# KEYS: record, plan, lock. ARGV: body, now, retention ms, owner token ('' outside a lock), idempotency key,
# the states a claim may take a key from (key_leaves, space-delimited).
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


class RedisKeys(RedisClient):
    """The Plans, KeyRecords, Nonces and Locks roles (gateway.stores.base)."""

    def __init__(self, url: str, keys: ChainKeys | None = None) -> None:
        super().__init__(url, keys)
        self._locks = LeasedLocks(RedisLeases(self), self.lease, "redis-store")

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

    async def consume_plan(self, plan_id: str) -> bool:
        return bool(await self._script(CONSUME, [self._plan_key(plan_id)], []))

    async def get_record(self, caller: str, key: str) -> KeyRecord | None:
        found = await self._call(self._redis.hmget(self._record_key(caller, key), ["body", "state", "owner"]))
        return await self._unless_orphaned(found)

    async def claim(self, record: KeyRecord, now: float, retention: float) -> Claim:
        keys = [
            self._record_key(record.caller, record.key),
            self._plan_key(record.plan_id),
            lock_key(self, record.target),
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
            return await self._script(CLAIM, keys, args), 0
        async with self._redis.pipeline(transaction=False) as pipe:
            await self._registered(CLAIM)(keys=keys, args=args, client=pipe)  # queued, sent by execute()
            pipe.execute_command("WAIT", self.config.min_replicas, int(self.config.replica_wait * 1000))
            answer, acknowledged = await self._call(pipe.execute())
        return answer, int(acknowledged)

    async def release(self, record: KeyRecord) -> None:
        keys = [self._record_key(record.caller, record.key), self._plan_key(record.plan_id)]
        await self._script(RELEASE, keys, [self._locks.owner(record), record.key, _leaves("release")])
        self._locks.forget(record)

    async def settle(self, record: KeyRecord, entry: AuditEntry | None = None) -> AuditEntry | None:
        # The entry first (a Lua script cannot compute the chain's HMAC): a crash in between leaves the entry and
        # the key in flight, which reads unknown once its lock lapses, so no outcome is ever missing its entry.
        stored = await append_chained(self, entry) if entry is not None else None
        keys = [self._record_key(record.caller, record.key), self._plan_key(record.plan_id)]
        try:
            args = [record.state, codec.dump(record), self._locks.owner(record), _leaves(record.state)]
            settled = await self._script(SETTLE, keys, args)
        except StoreUnavailable as exc:
            if stored is None:
                raise
            # The entry is stored: the outcome is kept without it (gateway.write.unsettled), never audited twice.
            raise OutcomeNotRecorded(str(exc), stored) from None
        self._locks.forget(record)
        if not settled:
            log.warning(
                "key %s was no longer this call's in-flight claim (its lock lapsed); its outcome %s was not recorded",
                record.key,
                record.state,
            )
        return stored

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

    async def use_nonce(self, nonce: str, now: float, ttl: float) -> bool:
        first = await self._call(
            self._redis.set(self.prefix + "nonce:" + nonce, "1", nx=True, px=max(1, int(ttl * 1000)))
        )
        return bool(first)

    def lock(self, target: str) -> AbstractAsyncContextManager[None]:
        return self._locks.hold(target)

    async def _unless_orphaned(self, fields: list[Any]) -> KeyRecord | None:
        """A record from [body, state, owner]; an in-flight one whose owner lost its lock is settled unknown."""
        record, owner = _record(fields), fields[2]
        if record is None or record.state != "in_flight" or not owner:
            return record
        keys = [
            self._record_key(record.caller, record.key),
            self._plan_key(record.plan_id),
            lock_key(self, record.target),
        ]
        return _record(await self._script(ORPHAN, keys, [owner, _leaves("unknown")]))

    def _plan_key(self, plan_id: str) -> str:
        return self.prefix + "plan:" + plan_id

    def _record_key(self, caller: str, key: str) -> str:
        # The caller is quoted so that a ':' in it cannot make two (caller, key) pairs share a name.
        return self.prefix + "key:" + quote(caller, safe="") + ":" + key


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
