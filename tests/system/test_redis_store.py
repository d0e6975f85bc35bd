"""The store contract against a real Redis, what every store shared by several replicas needs
(tests/support/shared_store.py: locks with leases, fencing of a holder whose lease lapsed, failing closed when
the server cannot be reached), and what is Redis's own: its key layout, renewal and URL."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import anyio
import pytest
import redis.asyncio as aioredis

from gateway.errors import StoreUnavailable
from gateway.records import AuditEntry
from gateway.stores.redis.keys import SETTLE
from gateway.stores.redis.store import RedisStore
from gateway.stores.redis.url import parse_url
from gateway.write.unsettled import Unsettled
from tests.support.processes import free_port
from tests.support.shared_store import Replicas, SharedStoreContract
from tests.unit.test_store_contract import RETENTION, StoreContract, in_flight, make_plan

pytestmark = pytest.mark.anyio


@pytest.fixture
def store_url(redis_url: str) -> str:
    return redis_url


class TestRedisStore(StoreContract):
    """The store contract against a real Redis."""


@pytest.fixture
async def replicas(redis_url: str) -> AsyncIterator[Replicas]:
    """Two stores on one Redis, as two replicas see it, and a lease that lapses by deleting the lock's key."""
    first, second = RedisStore(redis_url), RedisStore(redis_url)
    raw = aioredis.Redis.from_url(redis_url, decode_responses=True)

    async def lapse(target: str) -> None:
        await raw.delete(f"gateway:lock:{target}")

    try:
        yield first, second, lapse
    finally:
        await first.close()
        await second.close()
        await raw.aclose()


@pytest.fixture
def unreachable_url() -> str:
    return f"redis://127.0.0.1:{free_port()}/0?socket_connect_timeout=1"


class TestRedisSharedStore(SharedStoreContract):
    """What a store shared by replicas must do, against a real Redis."""


@pytest.fixture
async def raw(redis_url: str) -> AsyncIterator[tuple[RedisStore, aioredis.Redis]]:
    """A store and a raw client to play a dead holder or a newer replica."""
    store = RedisStore(redis_url)
    client = aioredis.Redis.from_url(redis_url, decode_responses=True)
    try:
        yield store, client
    finally:
        await store.close()
        await client.aclose()


async def test_records_a_newer_replica_wrote_read_back(raw: tuple[RedisStore, aioredis.Redis]) -> None:
    first, client = raw
    plan = make_plan()
    await first.put_plan(plan, time.time())
    await first.claim(in_flight(plan), time.time(), RETENTION)
    for name in (first.prefix + "plan:" + plan.plan_id, first.prefix + "key:alice:key-0001"):
        body = json.loads(await client.hget(name, "body") or "{}")
        await client.hset(name, "body", json.dumps({**body, "added_in_a_later_version": 1}))
    found = await first.get_plan(plan.plan_id, time.time())
    assert found == replace(plan, in_use_by="key-0001")
    assert await first.get_record("alice", "key-0001") == in_flight(plan)


async def test_a_lock_whose_holder_died_is_taken_once_its_lease_lapses(raw: tuple[RedisStore, aioredis.Redis]) -> None:
    store, client = raw
    await client.set("gateway:lock:tn_a", "7:dead-holder", px=300)
    with anyio.fail_after(10):
        async with store.lock("tn_a"):
            holder = await client.get("gateway:lock:tn_a")
    assert isinstance(holder, str) and holder.startswith("1:")  # the first fence issued for tn_a
    assert await client.get("gateway:lock:tn_a") is None  # released on exit


async def test_a_held_lock_is_renewed_past_its_lease(redis_url: str) -> None:
    store = RedisStore(redis_url + "?lock_lease=0.3")
    client = aioredis.Redis.from_url(redis_url, decode_responses=True)
    try:
        with anyio.fail_after(10):
            async with store.lock("tn_a"):
                token, until = await client.get("gateway:lock:tn_a"), time.monotonic() + 3 * store.lease
                while time.monotonic() < until:  # three leases: only renewal keeps the same holder
                    assert await client.get("gateway:lock:tn_a") == token
                    await anyio.sleep(0.02)
    finally:
        await store.close()
        await client.aclose()


async def test_records_written_by_a_newer_version_still_read(raw: tuple[RedisStore, aioredis.Redis]) -> None:
    store, client = raw
    plan = make_plan()
    await store.put_plan(plan, time.time())
    body = '{"caller":"alice","key":"key-0001","plan_id":"pl_one","target":"tn_a","state":"applied","future":1}'
    await client.hset("gateway:key:alice:key-0001", mapping={"body": body, "state": "applied", "owner": ""})
    assert await store.get_record("alice", "key-0001") == replace(in_flight(plan), state="applied")


def test_the_store_url_carries_our_parameters_and_refuses_unknown_ones() -> None:
    parsed = parse_url("redis://h:1/2?lock_lease=5&prefix=gw1:&socket_timeout=3&retries=1")
    assert (parsed.url, parsed.lease, parsed.prefix, parsed.retries, parsed.min_replicas) == (
        "redis://h:1/2?socket_timeout=3&socket_connect_timeout=1",
        5.0,
        "gw1:",
        1,
        0,
    )
    plain = parse_url("redis://h:1/0")
    assert (plain.url, plain.lease, plain.prefix) == (
        "redis://h:1/0?socket_timeout=1&socket_connect_timeout=1",
        60.0,
        "gateway:",
    )
    sentinel = parse_url("redis+sentinel://:pw@a:26379,b:26380/mymaster/3?replica_wait=2")
    assert (sentinel.sentinels, sentinel.service, sentinel.db, sentinel.password) == (
        [("a", 26379), ("b", 26380)],
        "mymaster",
        3,
        "pw",
    )
    assert (sentinel.min_replicas, sentinel.replica_wait, sentinel.options["socket_timeout"]) == (1, 2.0, 1.0)
    with pytest.raises(ValueError, match="lock_leese"):
        parse_url("redis://h:1/0?lock_leese=5")
    with pytest.raises(ValueError, match="positive"):
        parse_url("redis://h:1/0?lock_lease=0")
    with pytest.raises(ValueError, match="SERVICE"):
        parse_url("redis+sentinel://a:26379")


async def test_an_entry_stored_without_its_outcome_keeps_the_outcome_and_audits_it_once(
    raw: tuple[RedisStore, aioredis.Redis], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Redis stores a write's audit entry, then its key's outcome, in two steps. When it stops answering between
    them, the outcome is kept without the entry (OutcomeNotRecorded), and the later try settles the key as its
    claim's own: the key reads applied, and the audit holds the entry once."""
    store, _ = raw
    plan, unsettled = make_plan(), Unsettled()
    applied = replace(in_flight(plan), state="applied", result={"version": 4})
    entry = AuditEntry(
        at=time.time(), caller="alice", tool="reset_tenant", outcome="applied", idempotency_key="key-0001"
    )
    script = store._script

    async def settle_fails(lua: str, keys: list[str], args: list[str]) -> Any:
        if lua == SETTLE:
            raise StoreUnavailable("Redis stopped answering")
        return await script(lua, keys, args)

    await store.put_plan(plan, time.time())
    with anyio.fail_after(10):
        async with store.lock("tn_a"):
            assert (await store.claim(in_flight(plan), time.time(), RETENTION)).claimed
            monkeypatch.setattr(store, "_script", settle_fails)
            await unsettled.put(store, applied, entry)
        assert unsettled.kept == {("alice", "key-0001"): (applied, None)}
        monkeypatch.setattr(store, "_script", script)
        await unsettled.retry(store)
    assert unsettled.kept == {}
    assert await store.get_record("alice", "key-0001") == applied
    assert [e.outcome async for e in store.audit_entries() if e.idempotency_key == "key-0001"] == ["applied"]
