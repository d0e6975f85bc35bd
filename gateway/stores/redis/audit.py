"""The Redis store's audit: the ``audit`` list, one hash chain in append order (gateway.audit.chain). An append
reads the tail under WATCH and pushes the sealed entry in MULTI (a Lua script cannot compute the chain's HMAC), so
another replica's push in between makes it read the new tail and try again; a trim deletes a prefix and pushes its
checkpoint in one MULTI the same way. ``append_chained`` is the append a settle makes just before its script."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import cast

import redis.asyncio as aioredis
from redis.exceptions import WatchError

from gateway.audit.chain import ChainKeys, checkpoint, sealed
from gateway.records import AuditEntry
from gateway.stores import codec
from gateway.stores.redis.client import RedisClient

AUDIT_PAGE = 500


class RedisAudit(RedisClient):
    """The AuditLog role (gateway.stores.base)."""

    async def append_audit(self, entry: AuditEntry) -> AuditEntry:
        return await append_chained(self, entry)

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

    async def audit_entries(self) -> AsyncIterator[AuditEntry]:
        start = 0
        while True:
            page = await self._call(self._redis.lrange(self.prefix + "audit", start, start + AUDIT_PAGE - 1))
            for body in page:
                yield codec.load(AuditEntry, cast(str, body))
            if len(page) < AUDIT_PAGE:
                return
            start += AUDIT_PAGE


async def append_chained(client: RedisClient, entry: AuditEntry) -> AuditEntry:
    """Seal ``entry`` after the list's tail and push it, on the store's client."""
    return await client._call(_append_chained(client._redis, client.prefix + "audit", entry, client._keys))


async def _append_chained(redis: aioredis.Redis, name: str, entry: AuditEntry, keys: ChainKeys) -> AuditEntry:
    # Optimistic: read the tail under WATCH, push the sealed entry in MULTI; another replica's push in between
    # aborts the transaction and this one re-reads the new tail.
    async with redis.pipeline(transaction=True) as pipe:
        while True:
            try:
                await pipe.watch(name)
                tail = await pipe.lindex(name, -1)
                last = codec.load(AuditEntry, cast(str, tail)) if tail is not None else None
                stored = sealed(entry, last, keys)
                pipe.multi()  # type: ignore[no-untyped-call]
                pipe.rpush(name, codec.dump(stored))
                await pipe.execute()
                return stored
            except WatchError:
                continue
