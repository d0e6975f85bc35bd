"""What every store that several replicas share must do beyond the store contract, as one class of tests that
tests/system/test_redis_store.py and tests/system/test_postgres_store.py each run against a real server: shared
rate-limit buckets, locks that exclude holders on other replicas, fencing of a holder whose lease lapsed,
settling unknown a key whose owner lost its lock (and refusing the owner's late settle), a kept outcome settling
its own claim once its lock is gone, recovery that leaves live claims alone, and failing closed when the server
cannot be reached.

Each runner provides two fixtures: ``replicas`` (two stores on one server, as two replicas see it, and ``lapse``,
which ends a target's lease at once, as if its holder had stalled or died) and ``unreachable_url`` (a store URL
where nothing listens).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import replace

import anyio
import pytest

from gateway.errors import StoreUnavailable
from gateway.stores import Store, open_store
from tests.unit.test_store_contract import RETENTION, _assert_exclusive, in_flight, make_plan

Lapse = Callable[[str], Awaitable[None]]
Replicas = tuple[Store, Store, Lapse]


class SharedStoreContract:
    """The tests; a runner subclasses it beside its ``replicas`` and ``unreachable_url`` fixtures."""

    async def test_replicas_share_rate_limit_buckets(self, replicas: Replicas) -> None:
        first, second, _ = replicas
        assert await first.take_token("carol\nreset_tenant", 0.001, 2, 0.0) == 0.0
        assert await second.take_token("carol\nreset_tenant", 0.001, 2, 0.0) == 0.0
        assert await first.take_token("carol\nreset_tenant", 0.001, 2, 0.0) > 0

    async def test_a_lock_excludes_holders_on_other_replicas(self, replicas: Replicas) -> None:
        first, second, _ = replicas
        await _assert_exclusive([first, second, first, second], "tn_a")

    async def test_a_holder_whose_lease_lapsed_cannot_claim(self, replicas: Replicas) -> None:
        stale, fresh, lapse = replicas
        plan = make_plan()
        await stale.put_plan(plan, time.time())
        with anyio.fail_after(10):
            async with stale.lock("tn_a"):
                await lapse("tn_a")  # the lease lapsed while the holder was stuck
                async with fresh.lock("tn_a"):
                    claim = await stale.claim(in_flight(plan), time.time(), RETENTION)
                    assert (claim.claimed, claim.plan_busy) == (False, True)
                    assert await fresh.get_record("alice", "key-0001") is None
                    assert (await fresh.claim(in_flight(plan, "key-0002"), time.time(), RETENTION)).claimed

    async def test_a_key_in_flight_reads_unknown_once_its_owner_lost_the_lock_and_a_late_settle_is_refused(
        self, replicas: Replicas
    ) -> None:
        owner, other, lapse = replicas
        plan = make_plan()
        await owner.put_plan(plan, time.time())
        with anyio.fail_after(10):
            async with owner.lock("tn_a"):
                assert (await owner.claim(in_flight(plan), time.time(), RETENTION)).claimed
                assert (await other.get_record("alice", "key-0001")) == in_flight(plan)  # its owner still holds it
                await lapse("tn_a")  # the owner died or stalled past its lease
                orphan = await other.get_record("alice", "key-0001")
                await owner.settle(replace(in_flight(plan), state="applied", result={"version": 4}))
        assert orphan == replace(in_flight(plan), state="unknown")
        assert await other.get_record("alice", "key-0001") == orphan
        assert await other.get_plan(plan.plan_id, time.time()) is None

    async def test_a_kept_outcome_settles_its_own_claim_after_its_lock_is_gone(self, replicas: Replicas) -> None:
        """The store could not take a write's outcome at once; the process kept it (gateway.write.unsettled) and
        stores it at a later call, holding no lock: it is still that claim's own outcome, so the key reads it,
        not ``unknown``. A second replica's claim made meanwhile on another key is not touched."""
        owner, other, _ = replicas
        plan = make_plan()
        applied = replace(in_flight(plan), state="applied", result={"version": 4})
        await owner.put_plan(plan, time.time())
        with anyio.fail_after(10):
            async with owner.lock("tn_a"):
                assert (await owner.claim(in_flight(plan), time.time(), RETENTION)).claimed
            await owner.settle(applied)  # a later call: the lock is released, the claim is this process's
        assert await other.get_record("alice", "key-0001") == applied
        assert await other.get_plan(plan.plan_id, time.time()) is None

    async def test_recovery_at_start_up_settles_only_keys_whose_owner_lost_its_lock(self, replicas: Replicas) -> None:
        running, restarted, lapse = replicas
        live, dead = make_plan("pl_live", target="tn_a"), make_plan("pl_dead", target="tn_b")
        for plan in (live, dead):
            await running.put_plan(plan, time.time())
        with anyio.fail_after(10):
            async with running.lock("tn_a"), running.lock("tn_b"):
                await running.claim(in_flight(live, "key-live"), time.time(), RETENTION)
                await running.claim(in_flight(dead, "key-dead"), time.time(), RETENTION)
                await lapse("tn_b")  # the replica that claimed it died; its lease lapsed
                recovered = await restarted.recover_in_flight()
                assert await restarted.get_record("alice", "key-live") == in_flight(live, "key-live")
        assert recovered == [replace(in_flight(dead, "key-dead"), state="unknown")]
        assert await restarted.get_plan("pl_dead", time.time()) is None

    async def test_an_unreachable_server_fails_closed(self, unreachable_url: str) -> None:
        store = open_store(unreachable_url)
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
