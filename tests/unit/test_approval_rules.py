"""The pure rules of an approval: who may decide, what a decision does, and which facts it binds."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gateway.approvals.lifecycle import (
    DecisionRefused,
    Refused,
    State,
    approval_id_for,
    approval_url,
    approved_by,
    binds,
    decide,
    new_approval,
    state,
)
from gateway.identity.person import person_id
from gateway.records import Approval, Plan

NOW = 1_000_000.0
PLAN = Plan(
    "pl_0123456789abcdefghijkl",
    "agent-app/alice",
    "reset_tenant",
    "tn_checkout01",
    version=3,
    arguments={"tenantId": "tn_checkout01", "fixture": "empty"},
    summary={"rowsDeleted": 812, "rowsInserted": 0},
    expires_at=NOW + 600,
)
ALICE, BOB, CAROL = (person_id("https://idp.test", name) for name in ("alice", "bob", "carol"))


def approval(needed: int = 1, four_eyes: bool = False) -> Approval:
    return new_approval(PLAN, ALICE, "Delete 812 rows?", NOW, needed=needed, four_eyes=four_eyes)


def test_a_new_approval_is_pending_and_bound_to_its_plan() -> None:
    made = approval()
    assert state(made, NOW) is State.PENDING
    assert made.approval_id == approval_id_for(PLAN.plan_id) != PLAN.plan_id
    assert binds(made, PLAN)
    for changed in (
        replace(PLAN, version=4),
        replace(PLAN, summary={"rowsDeleted": 5000, "rowsInserted": 0}),
        replace(PLAN, caller="agent-app/mallory"),
        replace(PLAN, target="tn_prod_eu"),
    ):
        assert not binds(made, changed)


def test_enough_distinct_approvers_approve_and_the_same_one_twice_counts_once() -> None:
    made = approval(needed=2)
    once = decide(made, BOB, "Bob", "approve", NOW + 1)
    assert decide(once, BOB, "Bob", "approve", NOW + 2) is once
    assert state(once, NOW + 2) is State.PENDING
    twice = decide(once, CAROL, "Carol", "approve", NOW + 3)
    assert state(twice, NOW + 3) is State.APPROVED
    assert approved_by(twice) == ["Bob", "Carol"]


def test_a_reject_ends_it_and_no_later_verdict_changes_that() -> None:
    rejected = decide(approval(needed=2), BOB, "Bob", "reject", NOW + 1)
    assert state(rejected, NOW + 1) is State.REJECTED
    with pytest.raises(DecisionRefused) as raised:
        decide(rejected, CAROL, "Carol", "approve", NOW + 2)
    assert raised.value.reason is Refused.SETTLED
    with pytest.raises(DecisionRefused) as raised:
        decide(rejected, BOB, "Bob", "approve", NOW + 2)
    assert raised.value.reason is Refused.CHANGED_MIND


def test_with_four_eyes_the_caller_cannot_decide_their_own_write() -> None:
    made = approval(four_eyes=True)
    for verdict in ("approve", "reject"):
        with pytest.raises(DecisionRefused) as raised:
            decide(made, ALICE, "Alice", verdict, NOW + 1)
        assert raised.value.reason is Refused.OWN_WRITE
    assert state(decide(made, BOB, "Bob", "approve", NOW + 1), NOW + 1) is State.APPROVED
    assert state(decide(approval(), ALICE, "Alice", "approve", NOW + 1), NOW + 1) is State.APPROVED


def test_an_expired_approval_takes_no_decision() -> None:
    made = approval()
    assert state(made, PLAN.expires_at) is State.EXPIRED
    with pytest.raises(DecisionRefused) as raised:
        decide(made, BOB, "Bob", "approve", PLAN.expires_at)
    assert raised.value.reason is Refused.EXPIRED


def test_an_approval_link_is_one_path_segment_under_the_page_address() -> None:
    approval_id = approval_id_for(PLAN.plan_id)
    assert approval_url("https://gw.example:8443", approval_id) == f"https://gw.example:8443/approvals/{approval_id}"
    assert approval_url("", "ap_a/../b?c") == "/approvals/ap_a%2F..%2Fb%3Fc"
