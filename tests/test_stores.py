"""Every store keeps one contract: the same tests run against memory, SQLite and a real Redis.

The last section covers what only a store shared by several replicas needs: locks with leases, fencing of a
holder whose lease lapsed, and failing closed when Redis cannot be reached.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import anyio
import pytest
import redis.asyncio as aioredis

from gateway.audit import verify
from gateway.stores import AuditEntry, Expired, KeyRecord, Plan, Store, StoreUnavailable, open_store
from gateway.stores.base import TOMBSTONE_SECONDS
from gateway.stores.redis import RedisStore, parse_url
from tests.conftest import free_port

pytestmark = pytest.mark.anyio

RETENTION = 86_400.0


@pytest.fixture(params=["memory", "sqlite", "redis"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "redis":
        return str(request.getfixturevalue("redis_url"))
    return "memory" if request.param == "memory" else f"sqlite:{tmp_path}/gateway.db"


@pytest.fixture
async def store(store_url: str) -> AsyncIterator[Store]:
    opened = open_store(store_url)
    try:
        yield opened
    finally:
        await opened.close()


def make_plan(plan_id: str = "pl_one", *, expires_at: float | None = None, target: str = "tn_a") -> Plan:
    return Plan(
        plan_id,
        "alice",
        tool="reset_tenant",
        target=target,
        version=3,
        arguments={"tenantId": target, "fixture": "empty"},
        summary={"rowsDeleted": 812, "rowsInserted": 0},
        expires_at=time.time() + 600 if expires_at is None else expires_at,
    )


def in_flight(plan: Plan, key: str = "key-0001") -> KeyRecord:
    return KeyRecord(plan.caller, key, plan_id=plan.plan_id, target=plan.target, state="in_flight")


async def test_a_stored_plan_reads_back_whole(store: Store) -> None:
    plan = make_plan()
    await store.put_plan(plan, time.time())
    assert await store.get_plan(plan.plan_id, time.time()) == plan
    assert await store.get_plan("pl_never_issued", time.time()) is None


async def test_an_expired_plan_is_its_owners_tombstone_until_the_tombstone_lapses(store: Store) -> None:
    now = time.time()
    plan = make_plan(expires_at=now + 600)
    await store.put_plan(plan, now)
    assert await store.get_plan(plan.plan_id, now + 599) == plan
    assert await store.get_plan(plan.plan_id, now + 600) == Expired("alice")
    long_gone = make_plan("pl_old", expires_at=now - TOMBSTONE_SECONDS - 5)
    await store.put_plan(long_gone, now)
    await store.put_plan(make_plan("pl_new"), now)  # a later write purges what lapsed
    assert await store.get_plan("pl_old", now) is None


async def test_a_claim_records_the_key_in_flight_and_marks_the_plan(store: Store) -> None:
    plan = make_plan()
    await store.put_plan(plan, time.time())
    claim = await store.claim(in_flight(plan), time.time(), RETENTION)
    assert claim.claimed
    assert await store.get_record("alice", "key-0001") == in_flight(plan)
    found = await store.get_plan(plan.plan_id, time.time())
    assert isinstance(found, Plan) and found.in_use_by == "key-0001"


async def test_a_second_claim_of_one_key_gets_the_existing_record(store: Store) -> None:
    plan = make_plan()
    await store.put_plan(plan, time.time())
    await store.claim(in_flight(plan), time.time(), RETENTION)
    again = await store.claim(in_flight(plan), time.time(), RETENTION)
    assert not again.claimed
    assert again.existing == in_flight(plan)


async def test_another_key_on_a_plan_in_use_is_plan_busy(store: Store) -> None:
    plan = make_plan()
    await store.put_plan(plan, time.time())
    await store.claim(in_flight(plan), time.time(), RETENTION)
    other = await store.claim(in_flight(plan, "key-0002"), time.time(), RETENTION)
    assert (other.claimed, other.existing, other.plan_busy) == (False, None, True)
    assert await store.get_record("alice", "key-0002") is None


async def test_a_claim_on_a_missing_or_expired_plan_takes_nothing(store: Store) -> None:
    missing = await store.claim(in_flight(make_plan("pl_missing")), time.time(), RETENTION)
    plan = make_plan(expires_at=time.time() + 60)
    await store.put_plan(plan, time.time())
    expired = await store.claim(in_flight(plan, "key-0002"), time.time() + 61, RETENTION)
    assert (missing.claimed, missing.plan_busy) == (False, True)
    assert (expired.claimed, expired.plan_busy) == (False, True)
    assert await store.get_record("alice", "key-0001") is None
    assert await store.get_record("alice", "key-0002") is None


async def test_release_forgets_the_key_and_frees_the_plan(store: Store) -> None:
    plan = make_plan()
    await store.put_plan(plan, time.time())
    await store.claim(in_flight(plan), time.time(), RETENTION)
    await store.release(in_flight(plan))
    assert await store.get_record("alice", "key-0001") is None
    assert await store.get_plan(plan.plan_id, time.time()) == plan
    assert (await store.claim(in_flight(plan, "key-0002"), time.time(), RETENTION)).claimed


async def test_settle_records_the_outcome_and_deletes_the_plan(store: Store) -> None:
    plan = make_plan()
    await store.put_plan(plan, time.time())
    await store.claim(in_flight(plan), time.time(), RETENTION)
    result = {"planId": plan.plan_id, "tenantId": "tn_a", "version": 4, "nested": {"rows": [1, 2.5, None]}}
    applied = replace(in_flight(plan), state="applied", result=result)
    await store.settle(applied)
    assert await store.get_record("alice", "key-0001") == applied
    assert await store.get_plan(plan.plan_id, time.time()) is None
    assert (await store.claim(in_flight(plan), time.time(), RETENTION)).existing == applied


async def test_keys_belong_to_their_caller(store: Store) -> None:
    plan = make_plan()
    await store.put_plan(plan, time.time())
    await store.claim(in_flight(plan), time.time(), RETENTION)
    assert await store.get_record("bob", "key-0001") is None
    assert await store.get_record("alice:key", "0001") is None


async def test_a_nonce_is_used_once(store: Store) -> None:
    assert await store.use_nonce("n-1", time.time(), 300)
    assert not await store.use_nonce("n-1", time.time(), 300)
    assert await store.use_nonce("n-2", time.time(), 300)


async def test_the_audit_keeps_append_order_in_one_hash_chain(store: Store) -> None:
    entries = [
        AuditEntry(at=time.time() + n, caller="alice", tool="reset_tenant", outcome=outcome, extra={"n": n})
        for n, outcome in enumerate(["refused", "applied", "replayed"])
    ]
    for entry in entries:
        await store.append_audit(entry)
    stored = [entry async for entry in store.audit_entries()]
    assert [replace(entry, seq=0, prev_hash="", hash="") for entry in stored] == entries
    assert [entry.seq for entry in stored] == [1, 2, 3]
    assert verify(stored) == []


async def test_concurrent_audit_appends_never_fork_the_chain(store: Store) -> None:
    async with anyio.create_task_group() as tasks:
        for n in range(30):
            tasks.start_soon(store.append_audit, AuditEntry(at=float(n), caller="c", tool="t", outcome="applied"))
    stored = [entry async for entry in store.audit_entries()]
    assert [entry.seq for entry in stored] == list(range(1, 31))
    assert verify(stored) == []


async def test_a_rate_limit_bucket_empties_after_its_burst(store: Store) -> None:
    now = time.time()
    taken = [await store.take_token("alice\n*", 0.001, 2, now) for _ in range(3)]
    assert taken[:2] == [0.0, 0.0] and taken[2] > 0
    assert await store.take_token("bob\n*", 0.001, 2, now) == 0.0  # another caller's bucket is full


async def test_a_target_lock_admits_one_holder_at_a_time(store: Store) -> None:
    await _assert_exclusive([store] * 4, "tn_a")


async def test_locks_on_different_targets_do_not_wait_for_each_other(store: Store) -> None:
    with anyio.fail_after(10):
        async with store.lock("tn_a"), store.lock("tn_b"):
            pass


async def _assert_exclusive(stores: list[Store], target: str) -> None:
    """Each store's holder checks that nobody else is inside while it yields to the others several times."""
    inside: list[int] = []
    entered: list[int] = []

    async def hold(n: int, store: Store) -> None:
        async with store.lock(target):
            inside.append(n)
            entered.append(n)
            for _ in range(5):
                await store.get_plan("pl_none", time.time())  # real I/O for stores that have it
                await anyio.lowlevel.checkpoint()
                assert inside == [n]
            inside.remove(n)

    with anyio.fail_after(20):
        async with anyio.create_task_group() as tasks:
            for n, store in enumerate(stores):
                tasks.start_soon(hold, n, store)
    assert sorted(entered) == list(range(len(stores)))


# --- Redis only: several replicas, leases, fencing, connection loss ------------------------------------------


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


def test_the_store_url_carries_the_lease_and_prefix_and_refuses_unknown_parameters() -> None:
    assert parse_url("redis://h:1/2?lock_lease=5&prefix=gw1:&socket_timeout=3") == (
        "redis://h:1/2?socket_timeout=3",
        5.0,
        "gw1:",
    )
    assert parse_url("redis://h:1/0") == ("redis://h:1/0", 60.0, "gateway:")
    with pytest.raises(ValueError, match="lock_leese"):
        parse_url("redis://h:1/0?lock_leese=5")
    with pytest.raises(ValueError, match="positive"):
        parse_url("redis://h:1/0?lock_lease=0")
