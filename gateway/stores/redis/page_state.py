"""The Redis store's page state: ``approval:<id>`` and the ``approvals`` index, ``task:<id>``, ``taskkey:`` and the
``tasks`` index, ``session:<id>`` and the ``sessions`` index; each record expires with itself, each index is trimmed
on read. Storing an approval once, creating a task once per live key and replacing either at the revision read are
scripts; a task's replace also only from a status TASK_TRANSITIONS lets the new one follow (``task_leaves``)."""

from __future__ import annotations

import dataclasses
from typing import cast
from urllib.parse import quote

from gateway.records import TERMINAL, TOMBSTONE_SECONDS, Approval, ApproverSession, Task
from gateway.stores import codec
from gateway.stores.base import task_leaves
from gateway.stores.redis.client import RedisClient

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


class RedisPageState(RedisClient):
    """The Approvals, Tasks and ApproverSessions roles (gateway.stores.base)."""

    async def put_approval(self, approval: Approval) -> Approval:
        purge_ms = int((approval.expires_at + TOMBSTONE_SECONDS) * 1000)
        args = [codec.dump(approval), str(approval.rev), repr(approval.expires_at), str(purge_ms)]
        stored = await self._script(PUT_APPROVAL, [self._approval_key(approval.approval_id), self._approvals], args)
        return codec.load(Approval, cast(str, stored))

    async def get_approval(self, approval_id: str) -> Approval | None:
        body = await self._call(self._redis.hget(self._approval_key(approval_id), "body"))
        return codec.load(Approval, cast(str, body)) if body is not None else None

    async def replace_approval(self, approval: Approval) -> bool:
        changed = codec.dump(dataclasses.replace(approval, rev=approval.rev + 1))
        return bool(
            await self._script(REPLACE, [self._approval_key(approval.approval_id)], [str(approval.rev), changed])
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
        stored = await self._script(CREATE_TASK, [name, self._task_of_key(task.caller, task.key), self._tasks], args)
        return codec.load(Task, cast(str, stored))

    async def get_task(self, task_id: str) -> Task | None:
        body = await self._call(self._redis.hget(self._task_key(task_id), "body"))
        return codec.load(Task, cast(str, body)) if body is not None else None

    async def replace_task(self, task: Task) -> bool:
        changed = codec.dump(dataclasses.replace(task, rev=task.rev + 1))
        args = [str(task.rev), changed, task.status, " " + " ".join(task_leaves(task.status)) + " "]
        return bool(await self._script(REPLACE_TASK, [self._task_key(task.task_id)], args))

    async def live_tasks(self, now: float) -> list[Task]:
        found = [codec.load(Task, body) for body in await self._indexed(self._tasks, now, now)]
        return sorted((task for task in found if not task.terminal), key=lambda task: task.created_at)

    async def _indexed(self, index: str, after: float, trim_before: float) -> list[str]:
        """The bodies of the hashes an expiry index names with an expiry after ``after``, once the index is trimmed
        of names that expired before ``trim_before``."""
        await self._call(self._redis.zremrangebyscore(index, "-inf", repr(trim_before)))
        return await self._bodies(await self._call(self._redis.zrangebyscore(index, f"({after!r}", "+inf")))

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
