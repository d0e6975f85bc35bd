"""The Redis connection every role of the store shares: one primary (or the one Sentinel names), its Lua scripts,
and ``_call``, which turns a Redis that is down, unreachable, full or read-only into StoreUnavailable."""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from typing import Any, TypeVar, cast

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel
from redis.backoff import ExponentialWithJitterBackoff
from redis.commands.core import AsyncScript
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import OutOfMemoryError, ReadOnlyError
from redis.exceptions import TimeoutError as RedisTimeoutError

from gateway.audit.chain import ChainKeys
from gateway.stores.base import StoreUnavailable
from gateway.stores.redis.url import parse_url

log = logging.getLogger(__name__)

# A Redis that is down, unreachable, full (maxmemory with noeviction) or demoted to a read-only replica.
UNREACHABLE = (RedisConnectionError, RedisTimeoutError, OutOfMemoryError, ReadOnlyError)

T = TypeVar("T")


class RedisClient:
    """One Redis opened for the store's roles: what each role class (gateway.stores.redis.keys, audit, ...) adds
    its operations to. ``prefix`` starts every key name."""

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
        self._scripts: dict[str, AsyncScript] = {}

    def _registered(self, script: str) -> AsyncScript:
        """A role's Lua script, registered with this client the first time it is run (redis-py then runs it by
        its SHA, loading it again into a Redis that lost it)."""
        registered = self._scripts.get(script)
        if registered is None:
            registered = self._scripts[script] = self._redis.register_script(script)
        return registered

    async def _script(self, script: str, keys: list[str], args: list[str]) -> Any:
        return await self._call(self._registered(script)(keys=keys, args=args))

    async def _call(self, operation: Awaitable[T]) -> T:
        try:
            return await operation
        except UNREACHABLE as exc:
            log.warning("the Redis store cannot be reached: %s: %s", type(exc).__name__, exc)
            raise StoreUnavailable(f"the Redis store cannot be reached ({type(exc).__name__})") from exc

    async def _bodies(self, names: list[Any]) -> list[str]:
        """The ``body`` field of each hash named, in one pipelined round trip; a hash gone since is left out."""
        if not names:
            return []
        async with self._redis.pipeline(transaction=False) as pipe:
            for name in names:
                pipe.hget(cast(str, name), "body")
            bodies = await self._call(pipe.execute())
        return [cast(str, body) for body in bodies if body is not None]

    async def _disconnect(self) -> None:
        await self._redis.aclose()
        for sentinel in self._sentinel.sentinels if self._sentinel is not None else []:
            await sentinel.aclose()


def _socket_options(options: dict[str, Any]) -> dict[str, Any]:
    """The timeouts that also apply to asking the sentinels."""
    return {name: value for name, value in options.items() if name.startswith("socket_")}
