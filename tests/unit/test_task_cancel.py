"""``tasks/cancel`` ends the write's approval too: the page, its list (``?show=cancelled``) and the approvers' JSON API
say cancelled, a late Approve (on the page or through the API) is refused and records nothing, and nothing is
written. The cancel and the write's claim of its key and plan exclude each other in the store: a cancel after the
claim changes nothing, and a claim after the cancel finds no plan."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.approvals.lifecycle import (
    DecisionRefused,
    Refused,
    State,
    approval_id_for,
    cancel,
    decide,
    new_approval,
    state,
)
from gateway.mcp import resume as gateway_tasks
from gateway.records import KeyRecord, Plan
from tests.support import tasks
from tests.support.approvals import TOKENS, PageUser, csrf_of
from tests.support.clients import new_key, preview
from tests.support.profiles import Profile
from tests.unit.test_tasks import PAGE, World, agent, world_of

pytestmark = pytest.mark.anyio


@pytest.fixture
async def world(profile: Profile, tmp_path: Path) -> AsyncIterator[World]:
    async for made in world_of(profile, tmp_path):
        yield made


async def test_a_cancelled_task_ends_its_approval_everywhere_and_a_late_approve_is_refused(
    world: World, profile: Profile
) -> None:
    before = profile.write_count(world.db), profile.snapshot(world.db, profile.main)
    async with agent(world) as client:
        plan = await preview(client, profile)
        created = await tasks.call(client, profile.write_tool, {"planId": plan["planId"], "idempotencyKey": new_key()})
        assert isinstance(created, dict)
        await tasks.cancel(client, created["taskId"])
        await gateway_tasks.resume_due(world.gw)
        ended = await tasks.get(client, created["taskId"])
    approval_id = approval_id_for(plan["planId"])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=world.app), base_url=PAGE) as http:
        user = PageUser(http, PAGE)
        assert (await user.sign_in("bob")).status_code == 303
        detail = await http.get(f"/approvals/{approval_id}")
        cancelled_list = (await http.get("/approvals", params={"show": "cancelled"})).text
        waiting_list = (await http.get("/approvals")).text
        late = await user.post(f"/approvals/{approval_id}", {"csrf": csrf_of(detail.text), "decision": "approve"})
        after = await http.get(late.headers["location"]) if late.status_code == 303 else late
        api = {"Authorization": f"Bearer {TOKENS['carol']}"}
        listed = (await http.get("/approvals/api/open", headers=api)).json()["approvals"]
        by_api = await http.post(f"/approvals/api/{approval_id}", json={"decision": "approve"}, headers=api)
    stored = await world.gw.store.get_approval(approval_id)
    assert ended["status"] == "cancelled"
    assert "Cancelled: nothing was written" in detail.text and 'name="decision"' not in detail.text
    assert approval_id in cancelled_list and approval_id not in waiting_list
    assert "The agent cancelled this write" in after.text
    assert [each["state"] for each in listed if each["approvalId"] == approval_id] == ["cancelled"]
    assert by_api.status_code == 409 and by_api.json()["refused"] == "cancelled"
    assert stored is not None and stored.decisions == () and state(stored, world.clock()) is State.CANCELLED
    assert (profile.write_count(world.db), profile.snapshot(world.db, profile.main)) == before


async def test_a_cancel_after_the_claim_changes_nothing_and_a_claim_after_a_cancel_finds_no_plan(
    world: World, profile: Profile
) -> None:
    before = profile.write_count(world.db)
    async with agent(world) as client:
        claimed_plan = await preview(client, profile)
        first = {"planId": claimed_plan["planId"], "idempotencyKey": new_key()}
        claimed = await tasks.call(client, profile.write_tool, first)
        cancelled_plan = await preview(client, profile, profile.other)
        second = {"planId": cancelled_plan["planId"], "idempotencyKey": new_key()}
        cancelled = await tasks.call(client, profile.write_tool, second)
        assert isinstance(claimed, dict) and isinstance(cancelled, dict)
        task = await world.gw.store.get_task(claimed["taskId"])
        assert task is not None
        # Another call holds the first write's key and plan (as a write in flight does): the cancel comes too late.
        record = KeyRecord(task.caller, task.key, plan_id=task.plan_id, target=profile.main, state="in_flight")
        assert (await world.gw.store.claim(record, world.clock(), 60)).claimed
        await tasks.cancel(client, claimed["taskId"])
        too_late = await tasks.get(client, claimed["taskId"])
        # The second is cancelled first: its write can no longer claim its plan.
        await tasks.cancel(client, cancelled["taskId"])
        other = await world.gw.store.get_task(cancelled["taskId"])
        assert other is not None
        late = KeyRecord(other.caller, other.key, plan_id=other.plan_id, target=profile.other, state="in_flight")
        refused = await world.gw.store.claim(late, world.clock(), 60)
    kept = await world.gw.store.get_task(claimed["taskId"])
    assert too_late["status"] != "cancelled" and kept is not None and "already claimed" in (kept.message or "")
    approval = await world.gw.store.get_approval(approval_id_for(claimed_plan["planId"]))
    assert approval is not None and state(approval, world.clock()) is State.PENDING  # not ended by a late cancel
    assert not refused.claimed
    assert profile.write_count(world.db) == before


def test_a_cancelled_approval_takes_no_decision_and_a_settled_one_is_not_cancelled(profile: Profile) -> None:
    plan = Plan("pl_x", "local", profile.write_tool, profile.main, 1, {}, {}, expires_at=100.0)
    waiting = new_approval(plan, None, "Reset?", 0.0, needed=1, four_eyes=False)
    ended = cancel(waiting, 5.0)
    assert state(ended, 5.0) is State.CANCELLED
    with pytest.raises(DecisionRefused) as refused:
        decide(ended, "bob", "Bob", "approve", 6.0)
    assert refused.value.reason is Refused.CANCELLED
    rejected = decide(waiting, "bob", "Bob", "reject", 1.0)
    assert cancel(rejected, 5.0) is rejected  # a Reject stands
    assert cancel(waiting, 200.0) is waiting  # an expired approval stays expired


async def test_no_claim_is_taken_once_the_plan_and_its_approval_expired(world: World, profile: Profile) -> None:
    """Expiry and the write's claim exclude each other the same way: the claim checks the plan's expiry (which is
    the approval's) in its own atomic step, so an approval that expired cannot be carried out by a late claim."""
    async with agent(world) as client:
        created, _ = await _started(client, profile)
    task = await world.gw.store.get_task(created["taskId"])
    assert task is not None
    plan = await world.gw.store.get_plan(task.plan_id, world.clock())
    assert isinstance(plan, Plan)
    record = KeyRecord(task.caller, task.key, plan_id=task.plan_id, target=profile.main, state="in_flight")
    assert not (await world.gw.store.claim(record, plan.expires_at, 60)).claimed
    assert (await world.gw.store.claim(record, plan.expires_at - 1, 60)).claimed  # a moment before: it would


async def _started(client: Any, profile: Profile) -> tuple[dict[str, Any], str]:
    plan = await preview(client, profile)
    created = await tasks.call(client, profile.write_tool, {"planId": plan["planId"], "idempotencyKey": new_key()})
    assert isinstance(created, dict)
    return created, plan["planId"]
