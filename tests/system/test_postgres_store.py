"""The store contract against a real PostgreSQL server, what every store shared by several replicas needs
(tests/support/shared_store.py), and what is PostgreSQL's own: fences that only grow, concurrent claims of one
key from two replicas, a settle retried after its commit, a stalled or restarted server."""

from __future__ import annotations

import signal
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import anyio
import psycopg
import pytest

from gateway.errors import StoreUnavailable
from gateway.records import AuditEntry, Claim, Plan
from gateway.stores import Store
from gateway.stores.postgres.store import PostgresStore
from gateway.stores.postgres.url import parse_url
from tests.support.postgres import PostgresServer
from tests.support.processes import free_port
from tests.support.shared_store import Replicas, SharedStoreContract
from tests.unit.test_store_contract import RETENTION, StoreContract, in_flight, make_plan

pytestmark = pytest.mark.anyio

Raw = psycopg.AsyncConnection[tuple[Any, ...]]


@pytest.fixture
def store_url(postgres_url: str) -> str:
    return postgres_url


class TestPostgresStore(StoreContract):
    """The store contract against a real PostgreSQL."""


@pytest.fixture
async def raw(postgres_url: str) -> AsyncIterator[Raw]:
    """A plain connection on the test's schema, to play the clock, a dead holder or a newer replica."""
    parsed = parse_url(postgres_url)
    async with await psycopg.AsyncConnection.connect(parsed.conninfo, autocommit=True) as conn:
        await conn.execute("SELECT set_config('search_path', %s, false)", [parsed.schema])
        yield conn


@pytest.fixture
async def replicas(postgres_url: str, raw: Raw) -> AsyncIterator[Replicas]:
    """Two stores on one schema, as two replicas see it, and a lease that lapses by moving its expiry back."""
    first, second = PostgresStore(postgres_url), PostgresStore(postgres_url)

    async def lapse(target: str) -> None:
        query = "UPDATE locks SET expires_at = clock_timestamp() - interval '1 second' WHERE target = %s"
        await raw.execute(query, [target])

    try:
        yield first, second, lapse
    finally:
        await first.close()
        await second.close()


@pytest.fixture
def unreachable_url() -> str:
    return f"postgresql://postgres@127.0.0.1:{free_port()}/postgres?timeout=2"


class TestPostgresSharedStore(SharedStoreContract):
    """What a store shared by replicas must do, against a real PostgreSQL."""


@pytest.fixture
async def store(postgres_url: str) -> AsyncIterator[PostgresStore]:
    opened = PostgresStore(postgres_url)
    try:
        yield opened
    finally:
        await opened.close()


async def lock_token(raw: Raw, target: str) -> str | None:
    row = await (
        await raw.execute("SELECT token FROM locks WHERE target = %s AND expires_at > clock_timestamp()", [target])
    ).fetchone()
    return None if row is None else str(row[0])


async def test_a_lock_whose_holder_died_is_taken_once_its_lease_lapses_with_a_higher_fence(
    store: PostgresStore, raw: Raw
) -> None:
    await raw.execute(
        "INSERT INTO locks VALUES ('tn_a', '7:dead-holder', 7, clock_timestamp() + interval '300 milliseconds')"
    )
    with anyio.fail_after(10):
        async with store.lock("tn_a"):
            holder = await lock_token(raw, "tn_a")
    assert holder is not None and holder.startswith("8:")  # the fence only grows
    assert await lock_token(raw, "tn_a") is None  # released on exit


async def test_a_held_lock_is_renewed_past_its_lease(postgres_url: str, raw: Raw) -> None:
    store = PostgresStore(postgres_url + "&lock_lease=0.3")
    try:
        async with store.lock("tn_warm"):  # the pool is open before the clock starts
            pass
        with anyio.fail_after(10):
            async with store.lock("tn_a"):
                token, until = await lock_token(raw, "tn_a"), time.monotonic() + 3 * store.lease
                while time.monotonic() < until:  # three leases: only renewal keeps the same holder
                    assert token is not None and await lock_token(raw, "tn_a") == token
                    await anyio.sleep(0.02)
    finally:
        await store.close()


async def test_concurrent_claims_of_one_key_from_two_replicas_claim_once(
    replicas: Replicas,
) -> None:
    first, second, _ = replicas
    plans = [make_plan(f"pl_{n}") for n in range(20)]
    for plan in plans:
        await first.put_plan(plan, time.time())
    claims: list[Claim] = []

    async def claim(store: Store, plan: Plan) -> None:
        claims.append(await store.claim(in_flight(plan, "key-race"), time.time(), RETENTION))

    async with anyio.create_task_group() as tasks:
        for n, plan in enumerate(plans):
            tasks.start_soon(claim, (first, second)[n % 2], plan)
            tasks.start_soon(claim, (second, first)[n % 2], plan)
    assert sum(c.claimed for c in claims) == 1
    winner = await first.get_record("alice", "key-race")
    assert winner is not None and winner.state == "in_flight"
    assert all(c.existing in (None, winner) for c in claims)


async def test_a_settle_retried_after_its_commit_stores_its_entry_once(store: PostgresStore) -> None:
    plan = make_plan()
    await store.put_plan(plan, time.time())
    await store.claim(in_flight(plan), time.time(), RETENTION)
    applied = replace(in_flight(plan), state="applied", result={"version": 4})
    entry = AuditEntry(at=2.0, caller="alice", tool="reset_tenant", outcome="applied", idempotency_key="key-0001")
    assert await store.settle(applied, entry) is not None
    assert await store.settle(applied, entry) is None  # the reply of the first was lost: the retry stores nothing
    assert [e.outcome async for e in store.audit_entries()] == ["applied"]
    assert await store.get_record("alice", "key-0001") == applied


async def test_records_written_by_a_newer_version_still_read(store: PostgresStore, raw: Raw) -> None:
    plan = make_plan()
    await store.put_plan(plan, time.time())
    await store.claim(in_flight(plan), time.time(), RETENTION)
    for table, where in (("plans", "plan_id = 'pl_one'"), ("idempotency", "key = 'key-0001'")):
        await raw.execute(
            f"UPDATE {table} SET body = jsonb_set(body::jsonb, '{{added_later}}', '1')::text WHERE {where}"
        )
    assert await store.get_plan(plan.plan_id, time.time()) == replace(plan, in_use_by="key-0001")
    assert await store.get_record("alice", "key-0001") == in_flight(plan)


async def test_a_stopped_server_refuses_within_the_timeout_and_a_restart_is_taken_in_stride(
    postgres_server: PostgresServer, postgres_url: str
) -> None:
    store = PostgresStore(postgres_url + "&timeout=2")
    plan = make_plan()
    try:
        await store.put_plan(plan, time.time())
        postgres_server.signal_all(signal.SIGSTOP)  # stalled, its connections still open
        try:
            started = time.monotonic()
            with anyio.fail_after(20), pytest.raises(StoreUnavailable):
                await store.claim(in_flight(plan), time.time(), RETENTION)
            assert time.monotonic() - started < 10
        finally:
            postgres_server.signal_all(signal.SIGCONT)
        postgres_server.stop("immediate")  # every pooled connection dropped
        postgres_server.start()
        with anyio.fail_after(20):
            while True:  # at most one call fails on a dropped connection; the pool checks the next one first
                try:
                    assert (await store.claim(in_flight(plan), time.time(), RETENTION)).claimed
                    break
                except StoreUnavailable:
                    await anyio.sleep(0.1)
        assert await store.get_record("alice", "key-0001") == in_flight(plan)
    finally:
        await store.close()


async def test_the_views_answer_who_approved_what_and_which_writes_are_unknown(store: PostgresStore, raw: Raw) -> None:
    plan = make_plan()
    for entry in (
        AuditEntry(at=1.0, caller="alice", tool="reset_tenant", outcome="refused", code="plan_stale", target="tn_a"),
        AuditEntry(
            at=2.0,
            caller="alice",
            tool="reset_tenant",
            outcome="approval",
            plan_id=plan.plan_id,
            target="tn_a",
            version_before=3,
            confirmation="approve",
            extra={"mode": "url", "approver": "Bob", "approval": "ap_1"},
        ),
        AuditEntry(
            at=3.0,
            caller="alice",
            tool="reset_tenant",
            outcome="unknown",
            code="outcome_unknown",
            plan_id=plan.plan_id,
            idempotency_key="key-0001",
            target="tn_a",
            version_before=3,
        ),
        AuditEntry(
            at=4.0,
            caller="alice",
            tool="reset_tenant",
            outcome="unknown",
            code="outcome_unknown",
            idempotency_key="key-0001",
            target="tn_a",
        ),
    ):
        await store.append_audit(entry)
    await store.put_plan(plan, time.time())
    await store.claim(in_flight(plan, "key-0002"), time.time(), RETENTION)

    async def rows(query: str) -> list[tuple[Any, ...]]:
        return await (await raw.execute(query.encode())).fetchall()

    approvals = await rows(
        "SELECT approver, verdict, approval_id, target, requested_by, version FROM approval_decisions"
    )
    assert approvals == [("Bob", "approve", "ap_1", "tn_a", "alice", 3)]
    unknown = await rows(
        "SELECT seq, caller, idempotency_key, target, version_before, extract(epoch FROM at) FROM unknown_writes"
    )
    assert unknown == [(3, "alice", "key-0001", "tn_a", 3, 3)]
    assert await rows("SELECT outcome, code FROM audit_log ORDER BY seq") == [
        ("refused", "plan_stale"),
        ("approval", None),
        ("unknown", "outcome_unknown"),
        ("unknown", "outcome_unknown"),
    ]
    assert await rows("SELECT key, state, target FROM keys_now") == [("key-0002", "in_flight", "tn_a")]
