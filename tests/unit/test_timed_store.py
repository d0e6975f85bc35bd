"""The instrumented store forwards every operation the store protocols declare, and times each awaited one on
the request path under its own name."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest
from prometheus_client import CollectorRegistry, Histogram

from gateway.approvals.lifecycle import new_approval
from gateway.records import AuditEntry
from gateway.stores import open_store
from gateway.stores.base import OPERATIONS
from gateway.stores.timed import TimedStore
from tests.unit.test_store_contract import KEYS, RETENTION, approver_session, in_flight, make_plan

pytestmark = pytest.mark.anyio

TIMED = {
    "put_plan",
    "get_plan",
    "get_record",
    "claim",
    "release",
    "settle",
    "consume_plan",
    "use_nonce",
    "take_token",
    "append_audit",
    "count_write",
    "recent_writes",
    "put_approval",
    "get_approval",
    "replace_approval",
    "open_approvals",
    "put_session",
    "get_session",
    "delete_session",
    "sessions",
}


def observed(registry: CollectorRegistry) -> dict[str, float]:
    """The operations the histogram counted, with how many calls each."""
    return {
        sample.labels["operation"]: sample.value
        for metric in registry.collect()
        for sample in metric.samples
        if sample.name.endswith("_count") and sample.value
    }


async def test_every_operation_on_the_request_path_is_timed_once_under_its_name() -> None:
    registry = CollectorRegistry()
    store = TimedStore(open_store("memory", KEYS), Histogram("t_store_seconds", "", ["operation"], registry=registry))
    now, plan = time.time(), make_plan()
    await store.put_plan(plan, now)
    await store.get_plan(plan.plan_id, now)
    await store.claim(in_flight(plan), now, RETENTION)
    await store.get_record(plan.caller, "key-0001")
    await store.release(in_flight(plan))
    await store.claim(in_flight(plan), now, RETENTION)
    await store.settle(replace(in_flight(plan), state="applied", result={}))
    await store.consume_plan(plan.plan_id)
    await store.use_nonce("n-1", now, 300)
    await store.take_token("alice\n*", 1.0, 2, now)
    await store.append_audit(AuditEntry(at=now, caller="alice", tool="reset_tenant", outcome="refused"))
    await store.count_write(["caller:alice"], now)
    await store.recent_writes(["caller:alice"], now)
    approval = await store.put_approval(new_approval(plan, None, "?", now, needed=1, four_eyes=False))
    await store.get_approval(approval.approval_id)
    await store.replace_approval(approval)
    await store.open_approvals(now)
    await store.put_session(approver_session("as_one", now))
    await store.get_session("as_one", now)
    await store.sessions(now)
    await store.delete_session("as_one")
    async with store.lock("tn_a"):
        pass
    assert [entry.outcome async for entry in store.audit_entries()] == ["refused"]
    await store.trim_audit(0.0, now)
    await store.serve_from("test")
    await store.recover_in_flight()
    await store.close()
    assert observed(registry) == {**dict.fromkeys(TIMED, 1.0), "claim": 2.0}


def test_it_forwards_the_protocols_operations_and_nothing_else() -> None:
    store = TimedStore(open_store("memory", KEYS), Histogram("t_other_seconds", "", ["operation"], registry=None))
    assert all(callable(getattr(store, name)) for name in OPERATIONS)
    assert TIMED < OPERATIONS
    with pytest.raises(AttributeError):
        store._append  # noqa: B018  a store's own helpers are not part of any role
