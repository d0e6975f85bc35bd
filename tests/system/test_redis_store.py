"""The store contract against a real Redis, and what only a store shared by several replicas needs: locks with
leases, fencing of a holder whose lease lapsed, and failing closed when Redis cannot be reached."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import anyio
import pytest
import redis.asyncio as aioredis

from gateway.errors import StoreUnavailable
from gateway.stores.redis import RedisStore
from gateway.stores.redis_url import parse_url
from tests.support.processes import free_port
from tests.unit.test_store_contract import RETENTION, StoreContract, _assert_exclusive, in_flight, make_plan

pytestmark = pytest.mark.anyio


@pytest.fixture
def store_url(redis_url: str) -> str:
    return redis_url


class TestRedisStore(StoreContract):
    """The store contract against a real Redis."""


@pytest.fixture
async def replicas(redis_url: str) -> AsyncIterator[tuple[RedisStore, RedisStore, aioredis.Redis]]:
    """Two stores on one Redis, as two replicas see it, and a raw client to play the clock or a dead holder."""
    first, second = RedisStore(redis_url), RedisStore(redis_url)
    raw = aioredis.Redis.from_url(redis_url, decode_responses=True)
    try:
        yield first, second, raw
    finally:
        await first.close()
        await second.close()
        await raw.aclose()


async def test_replicas_share_rate_limit_buckets(replicas: tuple[RedisStore, RedisStore, aioredis.Redis]) -> None:
    first, second, _ = replicas
    assert await first.take_token("carol\nreset_tenant", 0.001, 2, 0.0) == 0.0
    assert await second.take_token("carol\nreset_tenant", 0.001, 2, 0.0) == 0.0
    assert await first.take_token("carol\nreset_tenant", 0.001, 2, 0.0) > 0


async def test_records_a_newer_replica_wrote_read_back(replicas: tuple[RedisStore, RedisStore, aioredis.Redis]) -> None:
    first, _, raw = replicas
    plan = make_plan()
    await first.put_plan(plan, time.time())
    await first.claim(in_flight(plan), time.time(), RETENTION)
    for name in (first.prefix + "plan:" + plan.plan_id, first.prefix + "key:alice:key-0001"):
        body = json.loads(await raw.hget(name, "body") or "{}")
        await raw.hset(name, "body", json.dumps({**body, "added_in_a_later_version": 1}))
    found = await first.get_plan(plan.plan_id, time.time())
    assert found == replace(plan, in_use_by="key-0001")
    assert await first.get_record("alice", "key-0001") == in_flight(plan)


async def test_a_lock_excludes_holders_on_other_replicas(
    replicas: tuple[RedisStore, RedisStore, aioredis.Redis],
) -> None:
    first, second, _ = replicas
    await _assert_exclusive([first, second, first, second], "tn_a")


async def test_a_lock_whose_holder_died_is_taken_once_its_lease_lapses(
    replicas: tuple[RedisStore, RedisStore, aioredis.Redis],
) -> None:
    store, _, raw = replicas
    await raw.set("gateway:lock:tn_a", "7:dead-holder", px=300)
    with anyio.fail_after(10):
        async with store.lock("tn_a"):
            holder = await raw.get("gateway:lock:tn_a")
    assert isinstance(holder, str) and holder.startswith("1:")  # the first fence issued for tn_a
    assert await raw.get("gateway:lock:tn_a") is None  # released on exit


async def test_a_held_lock_is_renewed_past_its_lease(redis_url: str) -> None:
    store = RedisStore(redis_url + "?lock_lease=0.3")
    raw = aioredis.Redis.from_url(redis_url, decode_responses=True)
    try:
        with anyio.fail_after(10):
            async with store.lock("tn_a"):
                token, until = await raw.get("gateway:lock:tn_a"), time.monotonic() + 3 * store.lease
                while time.monotonic() < until:  # three leases: only renewal keeps the same holder
                    assert await raw.get("gateway:lock:tn_a") == token
                    await anyio.sleep(0.02)
    finally:
        await store.close()
        await raw.aclose()


async def test_a_holder_whose_lease_lapsed_cannot_claim(
    replicas: tuple[RedisStore, RedisStore, aioredis.Redis],
) -> None:
    stale, fresh, raw = replicas
    plan = make_plan()
    await stale.put_plan(plan, time.time())
    with anyio.fail_after(10):
        async with stale.lock("tn_a"):
            await raw.delete("gateway:lock:tn_a")  # the lease lapsed while the holder was stuck
            async with fresh.lock("tn_a"):
                claim = await stale.claim(in_flight(plan), time.time(), RETENTION)
                assert (claim.claimed, claim.plan_busy) == (False, True)
                assert await fresh.get_record("alice", "key-0001") is None
                assert (await fresh.claim(in_flight(plan, "key-0002"), time.time(), RETENTION)).claimed


async def test_a_key_in_flight_reads_unknown_once_its_owner_lost_the_lock_and_a_late_settle_is_refused(
    replicas: tuple[RedisStore, RedisStore, aioredis.Redis],
) -> None:
    owner, other, raw = replicas
    plan = make_plan()
    await owner.put_plan(plan, time.time())
    with anyio.fail_after(10):
        async with owner.lock("tn_a"):
            assert (await owner.claim(in_flight(plan), time.time(), RETENTION)).claimed
            assert (await other.get_record("alice", "key-0001")) == in_flight(plan)  # its owner still holds it
            await raw.delete("gateway:lock:tn_a")  # the owner died or stalled past its lease
            orphan = await other.get_record("alice", "key-0001")
            await owner.settle(replace(in_flight(plan), state="applied", result={"version": 4}))
    assert orphan == replace(in_flight(plan), state="unknown")
    assert await other.get_record("alice", "key-0001") == orphan
    assert await other.get_plan(plan.plan_id, time.time()) is None


async def test_recovery_at_start_up_settles_only_keys_whose_owner_lost_its_lock(
    replicas: tuple[RedisStore, RedisStore, aioredis.Redis],
) -> None:
    running, restarted, raw = replicas
    live, dead = make_plan("pl_live", target="tn_a"), make_plan("pl_dead", target="tn_b")
    for plan in (live, dead):
        await running.put_plan(plan, time.time())
    with anyio.fail_after(10):
        async with running.lock("tn_a"), running.lock("tn_b"):
            await running.claim(in_flight(live, "key-live"), time.time(), RETENTION)
            await running.claim(in_flight(dead, "key-dead"), time.time(), RETENTION)
            await raw.delete("gateway:lock:tn_b")  # the replica that claimed it died; its lease lapsed
            recovered = await restarted.recover_in_flight()
            assert await restarted.get_record("alice", "key-live") == in_flight(live, "key-live")
    assert recovered == [replace(in_flight(dead, "key-dead"), state="unknown")]


async def test_records_written_by_a_newer_version_still_read(
    replicas: tuple[RedisStore, RedisStore, aioredis.Redis],
) -> None:
    store, _, raw = replicas
    plan = make_plan()
    await store.put_plan(plan, time.time())
    body = '{"caller":"alice","key":"key-0001","plan_id":"pl_one","target":"tn_a","state":"applied","future":1}'
    await raw.hset("gateway:key:alice:key-0001", mapping={"body": body, "state": "applied", "owner": ""})
    assert await store.get_record("alice", "key-0001") == replace(in_flight(plan), state="applied")


async def test_an_unreachable_redis_fails_closed(tmp_path: Path) -> None:
    store = RedisStore(f"redis://127.0.0.1:{free_port()}/0?socket_connect_timeout=1")
    try:
        with anyio.fail_after(20):
            with pytest.raises(StoreUnavailable):
                await store.get_record("alice", "key-0001")
            with pytest.raises(StoreUnavailable):
                await store.claim(in_flight(make_plan()), time.time(), RETENTION)
            with pytest.raises(StoreUnavailable):
                async with store.lock("tn_a"):
                    pass
            assert await store.recover_in_flight() == []  # a replica still starts; each key settles when read
    finally:
        await store.close()


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
