"""The Redis store's counters: ``bucket:<name>`` (a token bucket every replica shares, refilled on Redis's own clock
by one script) and ``writes:<scope>`` (one member per counted write, ``at:token:rows``, by time, trimmed to a day)."""

from __future__ import annotations

import secrets
from urllib.parse import quote

from gateway.records import WRITE_WINDOWS
from gateway.stores.redis.client import RedisClient

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


class RedisCounters(RedisClient):
    """The Counters role (gateway.stores.base)."""

    async def take_token(self, bucket: str, per_second: float, burst: int, now: float) -> float:
        key = self.prefix + "bucket:" + quote(bucket, safe="")
        return float(await self._script(TAKE_TOKEN, [key], [repr(per_second), str(burst)]))

    async def count_write(self, scopes: list[str], now: float, rows: int = 0) -> None:
        day = WRITE_WINDOWS["day"]
        async with self._redis.pipeline(transaction=True) as pipe:
            for scope in scopes:
                name = self._writes_key(scope)
                pipe.zadd(name, {f"{now!r}:{secrets.token_hex(6)}:{rows}": now})
                pipe.zremrangebyscore(name, "-inf", repr(now - day))
                pipe.expire(name, int(day) + 60)
            await self._call(pipe.execute())

    async def recent_writes(self, scopes: list[str], now: float, rows: bool = False) -> dict[str, dict[str, int]]:
        if rows:
            return await self._recent_rows(scopes, now)
        async with self._redis.pipeline(transaction=False) as pipe:
            for scope in scopes:
                for seconds in WRITE_WINDOWS.values():
                    pipe.zcount(self._writes_key(scope), f"({now - seconds!r}", repr(now))
            found = await self._call(pipe.execute())
        counts = iter(int(count) for count in found)
        return {scope: {window: next(counts) for window in WRITE_WINDOWS} for scope in scopes}

    async def _recent_rows(self, scopes: list[str], now: float) -> dict[str, dict[str, int]]:
        """The rows of the day's members, summed per window (a member from before rows were counted: 0)."""
        async with self._redis.pipeline(transaction=False) as pipe:
            for scope in scopes:
                pipe.zrangebyscore(
                    self._writes_key(scope), f"({now - WRITE_WINDOWS['day']!r}", repr(now), withscores=True
                )
            found = await self._call(pipe.execute())
        counts = {}
        for scope, members in zip(scopes, found, strict=True):
            touched = [(at, _rows_of(member)) for member, at in members]
            counts[scope] = {
                window: sum(n for at, n in touched if at > now - seconds) for window, seconds in WRITE_WINDOWS.items()
            }
        return counts

    def _writes_key(self, scope: str) -> str:
        return self.prefix + "writes:" + quote(scope, safe="")


def _rows_of(member: bytes | str) -> int:
    """The rows a ``writes:`` member counted: its third field (``at:token:rows``)."""
    text = member.decode() if isinstance(member, bytes) else member
    fields = text.split(":")
    return int(fields[2]) if len(fields) > 2 and fields[2].isdigit() else 0
