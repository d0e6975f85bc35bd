"""One codec for every stored record: what it writes reads back whole, and a field this version does not know (a
newer replica wrote it) is dropped the same way by every store that keeps records as text."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from gateway.approvals.lifecycle import decide, new_approval
from gateway.records import Approval, AuditEntry, KeyRecord, Plan
from gateway.stores import codec, open_store
from tests.unit.test_store_contract import KEYS, in_flight, make_plan

pytestmark = pytest.mark.anyio


def an_approval() -> Approval:
    asked = new_approval(make_plan(), "alice", "Delete 812 rows?", 100.0, needed=2, four_eyes=True)
    return decide(asked, "bob", "Bob", "approve", 101.0)


RECORDS = [
    make_plan(),
    KeyRecord("alice", "key-0001", "pl_one", "tn_a", "applied", {"version": 4}, "reset_tenant", 3),
    AuditEntry(at=1.0, caller="alice", tool="reset_tenant", outcome="applied", extra={"n": 1}, seq=2, hash="h"),
    an_approval(),
]


@pytest.mark.parametrize("record", RECORDS, ids=lambda record: type(record).__name__)
def test_every_record_reads_back_whole(record: Any) -> None:
    assert codec.load(type(record), codec.dump(record)) == record


@pytest.mark.parametrize("record", RECORDS, ids=lambda record: type(record).__name__)
def test_a_field_a_newer_version_wrote_is_dropped(record: Any) -> None:
    body = {**json.loads(codec.dump(record)), "added_in_a_later_version": {"any": "thing"}}
    assert codec.load(type(record), json.dumps(body)) == record


def test_a_decision_with_a_field_a_newer_version_wrote_reads_back() -> None:
    approval = an_approval()
    body = json.loads(codec.dump(approval))
    body["decisions"][0]["weight"] = 2
    assert codec.load(Approval, json.dumps(body)) == approval


def test_a_field_an_older_version_did_not_write_takes_its_default() -> None:
    plan = make_plan()
    body = {name: value for name, value in json.loads(codec.dump(plan)).items() if name != "approval"}
    assert codec.load(Plan, json.dumps(body)) == plan


def test_fields_kept_beside_the_body_override_it() -> None:
    record = in_flight(make_plan())
    assert codec.load(KeyRecord, codec.dump(record), state="unknown").state == "unknown"


async def test_the_sqlite_store_reads_records_a_newer_version_wrote(tmp_path: Path) -> None:
    path = tmp_path / "gateway.db"
    store = open_store(f"sqlite:{path}", KEYS)
    try:
        plan, approval = make_plan(), an_approval()
        await store.put_plan(plan, time.time())
        await store.put_approval(approval)
        await store.append_audit(AuditEntry(at=1.0, caller="alice", tool="reset_tenant", outcome="refused"))
        with sqlite3.connect(path) as db:
            for table, column in [("plans", "body"), ("approvals", "body"), ("audit", "entry")]:
                db.execute(f"UPDATE {table} SET {column} = json_set({column}, '$.added_in_a_later_version', 1)")
        assert await store.get_plan(plan.plan_id, time.time()) == plan
        assert await store.get_approval(approval.approval_id) == approval
        assert [entry.outcome async for entry in store.audit_entries()] == ["refused"]
    finally:
        await store.close()
