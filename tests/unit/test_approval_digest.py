"""What the approver saw is what runs: one digest over the facts a person approves (gateway.approvals.digest),
stored on the approval, computed again when the write runs. A write whose facts no longer hash to it (the
question or the rule that asked for people changed since, or an approval row whose digest is not the page's)
is refused as ``plan_stale``, and nothing is written. Each write that waited for people leaves its events in
order, sharing the digest: proposed, approval, the backend call's outcome, returned."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gateway.approvals.digest import canonical, digest_of, short
from gateway.audit import events as audit_events
from gateway.config import parse_config
from tests.support.approvals import approved_pending_write, page_data
from tests.support.clients import Clock, connect, error_body, error_code, running_gateway
from tests.support.profiles import TENANTS

pytestmark = pytest.mark.anyio


def test_the_canonical_json_is_rfc_8785s() -> None:
    """Keys sorted by UTF-16 code units, no whitespace, UTF-8, numbers as ECMAScript prints them."""
    value = {"b": [1, 2.0, 1e-7, 1e21, 1.5], "a": 'é"', "\u20ac": None, "\U0001f600": True, "ab": False, "\uff01": 0}
    # U+FF01 sorts after U+1F600 in UTF-16 (0xFF01 > 0xD83D, its high surrogate), not by code point
    expected = '{"a":"é\\"","ab":false,"b":[1,2,1e-7,1e+21,1.5],"€":null,"😀":true,"\uff01":0}'
    assert canonical(value) == expected.encode()
    facts = {"tool": "reset_tenant", "target": "tn_a", "version": 3}
    # sha256(b'{"target":"tn_a","tool":"reset_tenant","version":3}'), computed apart from this code
    assert digest_of(facts) == "a3713bb5fda5c2763f9cd6de8e957031d3cafc1ea1c947a1fdc57ce54b064452"
    assert short(digest_of(facts)) == "a371 3bb5 fda5 c276"


def raise_the_approvers(data: dict[str, Any]) -> None:
    data["tools"][TENANTS.write_tool]["approvers"] = 2


def reword_the_question(data: dict[str, Any]) -> None:
    data["tools"][TENANTS.preview_tool]["message"] = "Wipe {target_id}? It is only a test tenant."


@pytest.mark.parametrize("change", [raise_the_approvers, reword_the_question], ids=["rule", "question"])
async def test_a_write_whose_rule_or_question_changed_since_people_approved_is_stale(
    tmp_path: Path, era: str, change: Any
) -> None:
    data = page_data(tmp_path)
    async with running_gateway(parse_config(data), Clock(), backend_in_process=True) as gw:
        approval_id, args = await approved_pending_write(gw)
        approved = await gw.store.get_approval(approval_id)
    before = TENANTS.snapshot(tmp_path / "backend.db", TENANTS.other), TENANTS.write_count(tmp_path / "backend.db")
    change(data)  # the operator edits the config and restarts, after the approval
    async with (
        running_gateway(parse_config(data), Clock(), backend_in_process=True) as gw,
        connect(gw, era) as client,
    ):
        refused = await client.call_tool(TENANTS.write_tool, args)
    assert error_code(refused) == "plan_stale", refused.content
    assert approved is not None and error_body(refused)["details"]["approvedDigest"] == approved.digest
    assert "the question or the rule that asked for approval changed" in error_body(refused)["message"]
    after = TENANTS.snapshot(tmp_path / "backend.db", TENANTS.other), TENANTS.write_count(tmp_path / "backend.db")
    assert after == before


async def test_an_approval_row_whose_digest_is_not_the_pages_approves_nothing(tmp_path: Path, era: str) -> None:
    """Someone who can write to the store swaps the approved digest (or clears it): the write refuses."""
    data = page_data(tmp_path)
    db = tmp_path / "backend.db"
    async with running_gateway(parse_config(data), Clock(), backend_in_process=True) as gw:
        approval_id, args = await approved_pending_write(gw)
        before = TENANTS.snapshot(db, TENANTS.other), TENANTS.write_count(db)
        for forged in ("0" * 64, None):
            stored = await gw.store.get_approval(approval_id)
            assert stored is not None and await gw.store.replace_approval(replace(stored, digest=forged))
            async with connect(gw, era) as client:
                assert error_code(await client.call_tool(TENANTS.write_tool, args)) == "plan_stale"
        assert (TENANTS.snapshot(db, TENANTS.other), TENANTS.write_count(db)) == before


async def test_an_approved_write_leaves_its_events_in_order_sharing_one_digest(tmp_path: Path, era: str) -> None:
    data = page_data(tmp_path)
    async with running_gateway(parse_config(data), Clock(), backend_in_process=True) as gw:
        approval_id, args = await approved_pending_write(gw)
        async with connect(gw, era) as client:
            assert not (await client.call_tool(TENANTS.write_tool, args)).is_error
        stored = await gw.store.get_approval(approval_id)
        events = [entry async for entry in gw.store.audit_entries() if entry.plan_id == args["planId"]]
    assert stored is not None and stored.digest is not None
    assert [(entry.outcome, entry.confirmation) for entry in events] == [
        ("proposed", None),
        ("refused", None),  # approval_pending: the agent's client could not open the link
        ("approval", "approve"),
        ("applied", "approved"),
        ("returned", "approved"),
    ]
    assert {entry.extra["factsDigest"] for entry in events} == {stored.digest}
    assert events[0].extra["question"] == stored.message
    assert audit_events.problems(events) == []
    proposed, _, approval, applied, returned = events
    other = replace(approval, extra={**approval.extra, "factsDigest": "0" * 64})  # a yes to other facts
    assert audit_events.problems([proposed, other, applied, returned]) == [
        f"plan {args['planId']}: its events do not share one facts digest (2 seen)"
    ]
    assert audit_events.problems([proposed, applied, returned]) == [
        f"plan {args['planId']}: the write was executed with no approval before it"
    ]
    assert audit_events.problems([proposed, applied, approval, returned]) == [
        f"plan {args['planId']}: its events are out of order (proposed, executed, approval, returned)"
    ]
