"""Every store keeps one contract: the same tests run against memory and SQLite here, and against a real Redis
and a real PostgreSQL in tests/system/test_redis_store.py and tests/system/test_postgres_store.py (which import
these tests with their own ``store_url``: a store that needs a server process is tested in the system tier)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import cast

import anyio
import pytest

from gateway.approvals.lifecycle import decide, new_approval
from gateway.audit.chain import ChainKeys, verify
from gateway.errors import StoreInUse
from gateway.identity.person import person_id
from gateway.records import (
    KEY_TRANSITIONS,
    TASK_TRANSITIONS,
    TOMBSTONE_SECONDS,
    ApproverSession,
    AuditEntry,
    Expired,
    KeyRecord,
    KeyState,
    Passkey,
    Plan,
    Task,
)
from gateway.stores import Store, open_store

pytestmark = pytest.mark.anyio

RETENTION = 86_400.0
KEYS = ChainKeys([b"contract-audit-key-0123456789abcdef"])

KEY_LIFE = {
    ("absent", "claim"): "in_flight",
    ("in_flight", "release"): "absent",
    ("in_flight", "applied"): "applied",
    ("in_flight", "unknown"): "unknown",
    ("in_flight", "error"): "error",
}
"""A key's life, written out: (state, event) -> next state. Every pair not listed leaves the key as it was."""
KEY_STATES = ["absent", "in_flight", "applied", "unknown", "error"]
KEY_EVENTS = ["claim", "release", "applied", "unknown", "error"]

TASK_LIFE = {
    "input_required": {"working", "completed", "failed", "cancelled"},
    "working": {"input_required", "completed", "failed", "cancelled"},
    "completed": set(),
    "failed": set(),
    "cancelled": set(),
}
"""A task's life, written out: status -> the statuses it may move to. A terminal status never changes again."""


@pytest.fixture(params=["memory", "sqlite"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return "memory" if request.param == "memory" else f"sqlite:{tmp_path}/gateway.db"


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


def make_task(task_id: str = "tk_one", *, key: str = "key-0001", caller: str = "alice", ttl: float = 600) -> Task:
    now = time.time()
    arguments = {"planId": "pl_one", "idempotencyKey": key}
    return Task(task_id, caller, "reset_tenant", key, arguments, "pl_one", "ap_one", now, now, now + ttl)


def approver_session(session_id: str, now: float, *, seconds: float = 3600, person: str = "bob") -> ApproverSession:
    return ApproverSession(
        session_id,
        person_id("https://idp.test", person),
        f"{person}@example.test",
        via="oidc",
        audience="https://gw.example.com",
        csrf="csrf-" + session_id,
        created_at=now,
        expires_at=now + seconds,
        facts={"sub": person, "iss": "https://idp.test"},
    )


def in_flight(plan: Plan, key: str = "key-0001") -> KeyRecord:
    return KeyRecord(plan.caller, key, plan_id=plan.plan_id, target=plan.target, state="in_flight")


class StoreContract:
    """The contract, as methods: each tier subclasses it with its own ``store_url`` fixture."""

    @pytest.fixture
    async def store(self, store_url: str) -> AsyncIterator[Store]:
        opened = open_store(store_url, KEYS)
        try:
            yield opened
        finally:
            await opened.close()

    async def test_a_stored_plan_reads_back_whole(self, store: Store) -> None:
        plan = make_plan()
        await store.put_plan(plan, time.time())
        assert await store.get_plan(plan.plan_id, time.time()) == plan
        assert await store.get_plan("pl_never_issued", time.time()) is None

    async def test_an_expired_plan_is_its_owners_tombstone_until_the_tombstone_lapses(self, store: Store) -> None:
        now = time.time()
        plan = make_plan(expires_at=now + 600)
        await store.put_plan(plan, now)
        assert await store.get_plan(plan.plan_id, now + 599) == plan
        assert await store.get_plan(plan.plan_id, now + 600) == Expired("alice")
        long_gone = make_plan("pl_old", expires_at=now - TOMBSTONE_SECONDS - 5)
        await store.put_plan(long_gone, now)
        await store.put_plan(make_plan("pl_new"), now)  # a later write purges what lapsed
        assert await store.get_plan("pl_old", now) is None

    async def test_a_claim_records_the_key_in_flight_and_marks_the_plan(self, store: Store) -> None:
        plan = make_plan()
        await store.put_plan(plan, time.time())
        claim = await store.claim(in_flight(plan), time.time(), RETENTION)
        assert claim.claimed
        assert await store.get_record("alice", "key-0001") == in_flight(plan)
        found = await store.get_plan(plan.plan_id, time.time())
        assert isinstance(found, Plan) and found.in_use_by == "key-0001"

    async def test_a_second_claim_of_one_key_gets_the_existing_record(self, store: Store) -> None:
        plan = make_plan()
        await store.put_plan(plan, time.time())
        await store.claim(in_flight(plan), time.time(), RETENTION)
        again = await store.claim(in_flight(plan), time.time(), RETENTION)
        assert not again.claimed
        assert again.existing == in_flight(plan)

    async def test_another_key_on_a_plan_in_use_is_plan_busy(self, store: Store) -> None:
        plan = make_plan()
        await store.put_plan(plan, time.time())
        await store.claim(in_flight(plan), time.time(), RETENTION)
        other = await store.claim(in_flight(plan, "key-0002"), time.time(), RETENTION)
        assert (other.claimed, other.existing, other.plan_busy) == (False, None, True)
        assert await store.get_record("alice", "key-0002") is None

    async def test_a_claim_on_a_missing_or_expired_plan_takes_nothing(self, store: Store) -> None:
        missing = await store.claim(in_flight(make_plan("pl_missing")), time.time(), RETENTION)
        plan = make_plan(expires_at=time.time() + 60)
        await store.put_plan(plan, time.time())
        expired = await store.claim(in_flight(plan, "key-0002"), time.time() + 61, RETENTION)
        assert (missing.claimed, missing.plan_busy) == (False, True)
        assert (expired.claimed, expired.plan_busy) == (False, True)
        assert await store.get_record("alice", "key-0001") is None
        assert await store.get_record("alice", "key-0002") is None

    async def test_release_forgets_the_key_and_frees_the_plan(self, store: Store) -> None:
        plan = make_plan()
        await store.put_plan(plan, time.time())
        await store.claim(in_flight(plan), time.time(), RETENTION)
        await store.release(in_flight(plan))
        assert await store.get_record("alice", "key-0001") is None
        assert await store.get_plan(plan.plan_id, time.time()) == plan
        assert (await store.claim(in_flight(plan, "key-0002"), time.time(), RETENTION)).claimed

    async def test_settle_records_the_outcome_and_deletes_the_plan(self, store: Store) -> None:
        plan = make_plan()
        await store.put_plan(plan, time.time())
        await store.claim(in_flight(plan), time.time(), RETENTION)
        result = {"planId": plan.plan_id, "tenantId": "tn_a", "version": 4, "nested": {"rows": [1, 2.5, None]}}
        applied = replace(in_flight(plan), state="applied", result=result)
        await store.settle(applied)
        assert await store.get_record("alice", "key-0001") == applied
        assert await store.get_plan(plan.plan_id, time.time()) is None
        assert (await store.claim(in_flight(plan), time.time(), RETENTION)).existing == applied

    async def test_a_key_changes_state_only_as_the_written_out_table_says(self, store: Store) -> None:
        went: dict[tuple[str, str], str] = {}
        unchanged: list[tuple[str, str]] = []
        for n, (state, event) in enumerate((state, event) for state in KEY_STATES for event in KEY_EVENTS):
            plan = make_plan(f"pl_{n}")
            record = in_flight(plan, f"key-{n:04}")
            await store.put_plan(plan, time.time())
            if state != "absent":
                await store.claim(record, time.time(), RETENTION)
            if state not in ("absent", "in_flight"):
                await store.settle(_settled(record, state))
            before = await store.get_record(record.caller, record.key)
            if event == "claim":
                await store.claim(record, time.time(), RETENTION)
            elif event == "release":
                await store.release(record)
            else:
                await store.settle(_settled(record, event))
            after = await store.get_record(record.caller, record.key)
            went[(state, event)] = after.state if after is not None else "absent"
            if (state, event) not in KEY_LIFE and after != before:
                unchanged.append((state, event))
        assert went == {pair: KEY_LIFE.get(pair, pair[0]) for pair in went}
        assert unchanged == []  # an event the table does not list changes nothing, not even the stored result

    async def test_a_consumed_plan_is_gone_unless_a_key_has_claimed_it(self, store: Store) -> None:
        now = time.time()
        free, busy = make_plan("pl_free"), make_plan("pl_busy")
        await store.put_plan(free, now)
        await store.put_plan(busy, now)
        await store.claim(in_flight(busy), now, RETENTION)
        assert await store.consume_plan("pl_free")
        assert await store.get_plan("pl_free", now) is None
        assert not await store.consume_plan("pl_free")
        assert not await store.consume_plan("pl_busy")  # a write is applying it: it stays until settled
        held = await store.get_plan("pl_busy", now)
        assert isinstance(held, Plan) and held.in_use_by == "key-0001"
        assert not (await store.claim(in_flight(free, "key-0002"), now, RETENTION)).claimed

    async def test_keys_belong_to_their_caller(self, store: Store) -> None:
        plan = make_plan()
        await store.put_plan(plan, time.time())
        await store.claim(in_flight(plan), time.time(), RETENTION)
        assert await store.get_record("bob", "key-0001") is None
        assert await store.get_record("alice:key", "0001") is None

    async def test_a_nonce_is_used_once(self, store: Store) -> None:
        assert await store.use_nonce("n-1", time.time(), 300)
        assert not await store.use_nonce("n-1", time.time(), 300)
        assert await store.use_nonce("n-2", time.time(), 300)

    async def test_the_audit_keeps_append_order_in_one_hash_chain(self, store: Store) -> None:
        entries = [
            AuditEntry(at=time.time() + n, caller="alice", tool="reset_tenant", outcome=outcome, extra={"n": n})
            for n, outcome in enumerate(["refused", "applied", "replayed"])
        ]
        returned = [await store.append_audit(entry) for entry in entries]
        stored = [entry async for entry in store.audit_entries()]
        assert returned == stored  # each as stored: sealed, numbered
        assert [replace(entry, seq=0, prev_hash="", hash="", key_id="") for entry in stored] == entries
        assert [entry.seq for entry in stored] == [1, 2, 3]
        assert {entry.key_id for entry in stored} == {KEYS.sealing.id}
        assert verify(stored, KEYS).problems == []
        assert verify(stored, ChainKeys([b"some-other-key-0123456789abcdef0123"])).problems != []

    async def test_settle_stores_the_outcome_and_its_audit_entry_together(self, store: Store) -> None:
        plan = make_plan()
        await store.put_plan(plan, time.time())
        await store.append_audit(AuditEntry(at=1.0, caller="alice", tool="reset_tenant", outcome="refused"))
        await store.claim(in_flight(plan), time.time(), RETENTION)
        applied = replace(in_flight(plan), state="applied", result={"version": 4})
        entry = AuditEntry(at=2.0, caller="alice", tool="reset_tenant", outcome="applied", idempotency_key="key-0001")
        returned = await store.settle(applied, entry)
        stored = [entry async for entry in store.audit_entries()]
        assert returned == stored[-1]
        assert replace(stored[-1], seq=0, prev_hash="", hash="", key_id="") == entry
        assert await store.get_record("alice", "key-0001") == applied
        assert verify(stored, KEYS).problems == []

    async def test_trimming_the_audit_leaves_a_checkpoint_and_a_chain_that_still_verifies(self, store: Store) -> None:
        for n in range(5):
            await store.append_audit(AuditEntry(at=float(n), caller="c", tool="t", outcome="refused"))
        assert await store.trim_audit(0.0, 10.0) is None  # nothing older
        checkpoint = await store.trim_audit(3.0, 10.0)
        stored = [entry async for entry in store.audit_entries()]
        assert [entry.seq for entry in stored] == [4, 5, 6]
        assert checkpoint == stored[-1]
        assert (checkpoint.outcome, checkpoint.extra["trimmed_through"], checkpoint.extra["trimmed_entries"]) == (
            "trimmed",
            3,
            3,
        )
        assert verify(stored, KEYS).problems == []
        assert verify(stored[1:], KEYS).problems != []  # deleting past the checkpoint is still caught
        everything = await store.trim_audit(100.0, 11.0)  # the checkpoint goes on after the newest entry
        assert everything is not None and (everything.seq, everything.prev_hash) == (7, checkpoint.hash)
        assert verify([entry async for entry in store.audit_entries()], KEYS).problems == []

    async def test_concurrent_audit_appends_never_fork_the_chain(self, store: Store) -> None:
        async with anyio.create_task_group() as tasks:
            for n in range(30):
                tasks.start_soon(store.append_audit, AuditEntry(at=float(n), caller="c", tool="t", outcome="applied"))
        stored = [entry async for entry in store.audit_entries()]
        assert [entry.seq for entry in stored] == list(range(1, 31))
        assert verify(stored, KEYS).problems == []

    async def test_a_rate_limit_bucket_empties_after_its_burst(self, store: Store) -> None:
        now = time.time()
        taken = [await store.take_token("alice\n*", 0.001, 2, now) for _ in range(3)]
        assert taken[:2] == [0.0, 0.0] and taken[2] > 0
        assert await store.take_token("bob\n*", 0.001, 2, now) == 0.0  # another caller's bucket is full

    async def test_counted_writes_and_their_rows_are_summed_per_scope_and_window(self, store: Store) -> None:
        now = time.time()
        await store.count_write(["caller:alice", "all"], now - 7200, rows=500)  # out of the hour, in the day
        await store.count_write(["caller:alice", "all"], now - 30, rows=12)
        await store.count_write(["caller:bob", "all"], now - 5)  # a write that touches no counted rows
        scopes = ["caller:alice", "caller:bob", "all", "caller:nobody"]
        writes = await store.recent_writes(scopes, now)
        rows = await store.recent_writes(scopes, now, rows=True)
        assert writes == {
            "caller:alice": {"minute": 1, "hour": 1, "day": 2},
            "caller:bob": {"minute": 1, "hour": 1, "day": 1},
            "all": {"minute": 2, "hour": 2, "day": 3},
            "caller:nobody": {"minute": 0, "hour": 0, "day": 0},
        }
        assert rows == {
            "caller:alice": {"minute": 12, "hour": 12, "day": 512},
            "caller:bob": {"minute": 0, "hour": 0, "day": 0},
            "all": {"minute": 12, "hour": 12, "day": 512},
            "caller:nobody": {"minute": 0, "hour": 0, "day": 0},
        }

    async def test_a_target_lock_admits_one_holder_at_a_time(self, store: Store) -> None:
        await _assert_exclusive([store] * 4, "tn_a")

    async def test_locks_on_different_targets_do_not_wait_for_each_other(self, store: Store) -> None:
        with anyio.fail_after(10):
            async with store.lock("tn_a"), store.lock("tn_b"):
                pass

    async def test_an_approval_is_stored_once_and_read_back_whole(self, store: Store) -> None:
        first = new_approval(make_plan(), "alice", "Delete 812 rows?", time.time(), needed=2, four_eyes=True)
        assert await store.put_approval(first) == first
        later = replace(first, message="another question")
        assert await store.put_approval(later) == first  # the first one stays
        assert await store.get_approval(first.approval_id) == first
        assert await store.get_approval("ap_nothing") is None

    async def test_an_approval_is_replaced_only_over_the_revision_it_was_read_at(self, store: Store) -> None:
        stored = await store.put_approval(new_approval(make_plan(), None, "?", time.time(), needed=2, four_eyes=False))
        bob = decide(stored, "bob", "Bob", "approve", time.time())
        carol = decide(stored, "carol", "Carol", "approve", time.time())
        assert await store.replace_approval(bob)
        assert not await store.replace_approval(carol)  # read at the same revision: refused, not lost
        now_stored = await store.get_approval(stored.approval_id)
        assert now_stored is not None and now_stored.rev == 1 and now_stored.decisions == bob.decisions
        assert await store.replace_approval(decide(now_stored, "carol", "Carol", "approve", time.time()))
        final = await store.get_approval(stored.approval_id)
        assert final is not None and [d.name for d in final.decisions] == ["Bob", "Carol"] and final.rev == 2

    async def test_open_approvals_are_the_unexpired_ones_newest_first(self, store: Store) -> None:
        now = time.time()
        older = new_approval(make_plan("pl_older"), None, "?", now - 10, needed=1, four_eyes=False)
        newer = new_approval(make_plan("pl_newer"), None, "?", now, needed=1, four_eyes=False)
        gone = new_approval(make_plan("pl_gone", expires_at=now - 1), None, "?", now - 700, needed=1, four_eyes=False)
        for approval in (older, newer, gone):
            await store.put_approval(approval)
        assert [a.plan_id for a in await store.open_approvals(now)] == ["pl_newer", "pl_older"]
        kept = await store.open_approvals(now - TOMBSTONE_SECONDS)  # the page's expired filter: an hour back
        assert [a.plan_id for a in kept] == ["pl_newer", "pl_older", "pl_gone"]

    async def test_a_session_is_kept_whole_until_it_expires_or_is_revoked(self, store: Store) -> None:
        now = time.time()
        kept = approver_session("as_kept", now)
        await store.put_session(kept)
        await store.put_session(approver_session("as_short", now, seconds=1))
        assert await store.get_session("as_kept", now) == kept
        assert await store.get_session("as_short", now + 2) is None  # expired: gone for every replica
        assert await store.get_session("as_nothing", now) is None
        assert await store.delete_session("as_kept")
        assert not await store.delete_session("as_kept")
        assert await store.get_session("as_kept", now) is None

    async def test_sessions_lists_the_live_ones_newest_first(self, store: Store) -> None:
        now = time.time()
        for number, seconds in enumerate((3600, 3600, 0.25)):
            await store.put_session(approver_session(f"as_{number}", now + number, seconds=seconds))
        assert [session.session_id for session in await store.sessions(now + 2.5)] == ["as_1", "as_0"]

    async def test_a_passkey_is_stored_once_replaced_only_over_its_revision_and_kept_when_revoked(
        self, store: Store
    ) -> None:
        now = time.time()
        first = Passkey("cred-1", "pk-1", person_id("https://idp", "alice"), "Alice", "laptop", now)
        assert await store.put_passkey(first)
        assert not await store.put_passkey(replace(first, public_key="pk-forged"))  # a credential id is taken once
        assert await store.get_passkey("cred-1") == first
        counted = replace(first, sign_count=7)
        assert await store.replace_passkey(counted)
        assert not await store.replace_passkey(replace(first, revoked_at=now))  # read at an older revision
        revoked = replace(counted, rev=1, revoked_at=now + 1)
        assert await store.replace_passkey(revoked)
        assert await store.get_passkey("cred-1") == replace(revoked, rev=2)
        assert await store.get_passkey("cred-none") is None
        second = Passkey("cred/2+", "pk-2", person_id("https://idp", "bob"), "Bob", "key", now + 5)
        assert await store.put_passkey(second)
        assert [each.credential_id for each in await store.passkeys()] == ["cred/2+", "cred-1"]

    async def test_a_task_is_created_once_per_live_key_and_read_back_whole(self, store: Store) -> None:
        first = replace(make_task(), identity={"client": "agent", "scopes": ["tenants:reset"]})
        assert await store.create_task(first) == first
        again = make_task("tk_two")  # the same caller and key while the first is live: the first answers
        assert await store.create_task(again) == first
        assert await store.get_task("tk_two") is None
        other = make_task("tk_three", key="key-0002")
        assert await store.create_task(other) == other
        assert await store.create_task(make_task("tk_four", caller="bob")) != first  # keys are per caller
        assert await store.get_task(first.task_id) == first
        assert await store.get_task("tk_nothing") is None

    async def test_a_task_is_replaced_only_over_its_revision_and_a_terminal_one_frees_its_key(
        self, store: Store
    ) -> None:
        task = await store.create_task(make_task())
        working = replace(task, status="working")
        assert await store.replace_task(working)
        assert not await store.replace_task(replace(task, status="cancelled"))  # read at revision 0: refused
        stored = await store.get_task(task.task_id)
        assert stored is not None and (stored.status, stored.rev) == ("working", 1)
        done = replace(stored, status="completed", result={"content": [], "isError": False})
        assert await store.replace_task(done)
        assert [t.task_id for t in await store.live_tasks(time.time())] == []
        after = make_task("tk_after")  # the same key again once the first task ended: a new task
        assert await store.create_task(after) == after

    async def test_a_task_moves_only_as_the_written_out_table_says(self, store: Store) -> None:
        went: dict[tuple[str, str], str] = {}
        unchanged: list[tuple[str, str]] = []
        for n, (status, to) in enumerate((status, to) for status in TASK_LIFE for to in TASK_LIFE):
            stored = await store.create_task(replace(make_task(f"tk_{n}", key=f"key-{n:04}"), status=status))
            replaced = await store.replace_task(replace(stored, status=to, message=f"moved to {to}"))
            after = await store.get_task(stored.task_id)
            assert after is not None
            went[(status, to)] = after.status
            if to != status and to not in TASK_LIFE[status] and (replaced or after != stored):
                unchanged.append((status, to))
        assert went == {(status, to): to if to in TASK_LIFE[status] else status for status, to in went}
        assert unchanged == []  # a move the table does not list is refused and changes nothing, not even the rev

    async def test_live_tasks_are_the_unexpired_unfinished_ones_oldest_first(self, store: Store) -> None:
        older = replace(make_task("tk_older", key="key-0001"), created_at=time.time() - 10)
        newer = make_task("tk_newer", key="key-0002")
        gone = replace(make_task("tk_gone", key="key-0003", ttl=-1), created_at=time.time() - 700)
        for task in (newer, older, gone):
            await store.create_task(task)
        assert [t.task_id for t in await store.live_tasks(time.time())] == ["tk_older", "tk_newer"]

    async def test_this_process_may_serve_the_store_and_take_it_again(self, store: Store) -> None:
        await store.serve_from("test process")
        await store.serve_from("test process")
        assert await store.recover_in_flight() == []


class TestMemoryAndSqliteStores(StoreContract):
    """The contract against the stores of one process."""


async def test_a_sqlite_store_is_served_by_one_process_until_it_closes(tmp_path: Path) -> None:
    first, second = open_store(f"sqlite:{tmp_path}/gateway.db"), open_store(f"sqlite:{tmp_path}/gateway.db")
    try:
        await first.serve_from("the first (pid 1)")
        with pytest.raises(StoreInUse, match=r"the first \(pid 1\)"):
            await second.serve_from("the second (pid 2)")
        await first.close()
        await second.serve_from("the second (pid 2)")
    finally:
        await first.close()
        await second.close()


def test_the_key_table_every_store_applies_is_the_one_written_out_here() -> None:
    assert KEY_TRANSITIONS == KEY_LIFE


def test_the_task_table_every_store_applies_is_the_one_written_out_here() -> None:
    assert TASK_TRANSITIONS == TASK_LIFE


def _settled(record: KeyRecord, state: str) -> KeyRecord:
    """The record settled by the event named after its end state, with a result that says which."""
    return replace(record, state=cast(KeyState, state), result={"settled": state})


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
