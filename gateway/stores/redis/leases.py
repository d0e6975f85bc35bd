"""The Redis store's lock steps (gateway.stores.leases.LeaseSteps, the loop around them): acquire, renew and unlock
as scripts on ``lock:<target>`` (the holder's token, ``<fence>:<random>``, with its lease) and ``fence:<target>``
(incremented on every acquire, never reset, so a token is never issued twice)."""

from __future__ import annotations

from urllib.parse import quote

from gateway.stores.redis.client import RedisClient

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


class RedisLeases:
    """The lock's atomic steps as scripts, on the store's client."""

    def __init__(self, client: RedisClient) -> None:
        self._client = client

    async def acquire(self, target: str, nonce: str, lease_ms: int) -> str | None:
        fence = self._client.prefix + "fence:" + quote(target, safe="")
        token = await self._client._script(ACQUIRE, [lock_key(self._client, target), fence], [nonce, str(lease_ms)])
        return str(token) if token else None

    async def renew(self, target: str, token: str, lease_ms: int) -> bool:
        return bool(await self._client._script(RENEW, [lock_key(self._client, target)], [token, str(lease_ms)]))

    async def unlock(self, target: str, token: str) -> None:
        await self._client._script(UNLOCK, [lock_key(self._client, target)], [token])


def lock_key(client: RedisClient, target: str) -> str:
    """The name of a target's lock (the claim's script checks its token too)."""
    return client.prefix + "lock:" + quote(target, safe="")
