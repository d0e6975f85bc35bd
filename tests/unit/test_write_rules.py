"""The write path's pure decisions: the key state machine and the outcome of a sent write."""

from __future__ import annotations

import json
from dataclasses import replace

import mcp_types as types
import pytest

from gateway.catalog.published import build_catalog
from gateway.config import WriteTool, load_config
from gateway.config.expressions import MISSING
from gateway.errors import ToolError
from gateway.records import Expired, KeyRecord, Plan, Reply
from gateway.write.steps import (
    KEY_TRANSITIONS,
    LOST,
    AfterLookup,
    Seen,
    Settlement,
    after_key_lookup,
    next_key_state,
    plan_in_use,
    require_form,
    require_unchanged,
    require_yes,
    settle,
    uses_up_plan,
)

PLAN = Plan(
    "pl_0123456789abcdefghij",
    "local",
    "reset_tenant",
    "tn_a",
    version=3,
    arguments={"tenantId": "tn_a", "fixture": "empty"},
    summary={"rowsDeleted": 812, "rowsInserted": 0},
    expires_at=1e12,
)


def _reset_tool() -> WriteTool:
    tool = load_config().tools["reset_tenant"]
    assert isinstance(tool, WriteTool)
    return tool


WRITE = _reset_tool()
PREVIEW = "preview_tenant_reset"


def tenant(version: int) -> dict[str, object]:
    return {"id": "tn_a", "name": "A", "rows": 0, "version": version, "protected": False}


FITS = build_catalog(load_config(), {"fixtures": {"empty": 0, "smoke": 25}}).tools["reset_tenant"].fits


def settled(reply: Reply | None, current: dict[str, object] | None = None) -> Settlement:
    version = current["version"] if current is not None else MISSING
    return settle(PLAN, reply, current, version, WRITE, PREVIEW, FITS)


def test_every_listed_key_transition_is_legal_and_others_raise() -> None:
    states = {state for state, _ in KEY_TRANSITIONS} | set(KEY_TRANSITIONS.values())
    events = {event for _, event in KEY_TRANSITIONS}
    for state in states:
        for event in events:
            if (state, event) in KEY_TRANSITIONS:
                assert next_key_state(state, event) == KEY_TRANSITIONS[(state, event)]
            else:
                with pytest.raises(ValueError):
                    next_key_state(state, event)


def test_a_settled_key_never_goes_back_in_flight() -> None:
    for final in ("applied", "unknown", "error"):
        with pytest.raises(ValueError):
            next_key_state(final, "claim")


@pytest.mark.parametrize(
    ("state", "plan_id", "expected"),
    [
        ("applied", PLAN.plan_id, AfterLookup.REPLAY),
        ("unknown", PLAN.plan_id, AfterLookup.UNKNOWN),
        ("in_flight", PLAN.plan_id, "request_in_progress"),
        ("applied", "pl_other_other_other_other", "idempotency_key_reused"),
    ],
)
def test_what_an_existing_key_means(state: str, plan_id: str, expected: object) -> None:
    record = KeyRecord("local", "key-12345678", PLAN.plan_id, "tn_a", state)  # type: ignore[arg-type]
    if isinstance(expected, AfterLookup):
        assert after_key_lookup(record, plan_id) is expected
    else:
        with pytest.raises(ToolError) as raised:
            after_key_lookup(record, plan_id)
        assert raised.value.code == expected


@pytest.mark.parametrize(
    ("found", "preview", "code"),
    [
        (PLAN, PREVIEW, "request_in_progress"),
        (replace(PLAN, in_use_by="key-other-0001"), PREVIEW, "request_in_progress"),
        (None, PREVIEW, "plan_not_found"),
        (Expired("local"), PREVIEW, "plan_expired"),
        (Expired("someone-else"), PREVIEW, "plan_not_found"),
        (None, None, "request_in_progress"),
    ],
    ids=["claimed", "claimed-by-another-key", "gone", "expired", "expired-not-ours", "implied-plan"],
)
def test_what_a_claim_that_found_the_plan_in_use_answers(
    found: Plan | Expired | None, preview: str | None, code: str
) -> None:
    """A free key whose claim found the plan gone or claimed: a plan from a preview says which, else another call
    with another key is carrying it out; a write without a preview is in progress."""
    refusal = plan_in_use(found, "local", "reset_tenant", preview)
    assert refusal.code == code
    assert refusal.next_tool == (None if code == "request_in_progress" else PREVIEW)


@pytest.mark.parametrize(
    ("capabilities", "can_ask"),
    [
        (None, False),
        (types.ClientCapabilities(), False),
        (types.ClientCapabilities(elicitation=types.ElicitationCapability()), True),
        (
            types.ClientCapabilities(elicitation=types.ElicitationCapability(form=types.FormElicitationCapability())),
            True,
        ),
        (
            types.ClientCapabilities(elicitation=types.ElicitationCapability(url=types.UrlElicitationCapability())),
            False,
        ),
    ],
    ids=["none", "no-elicitation", "empty-means-form", "form", "url-only"],
)
def test_only_a_form_capable_client_can_be_asked(capabilities: types.ClientCapabilities | None, can_ask: bool) -> None:
    if can_ask:
        require_form(capabilities)
    else:
        with pytest.raises(ToolError) as raised:
            require_form(capabilities)
        assert raised.value.code == "confirmation_unavailable"


def test_a_well_formed_reply_is_applied_with_its_version() -> None:
    reply = Reply(False, json.dumps({"id": "tn_a", "rowsDeleted": 812, "rowsInserted": 0, "version": 4}))
    settlement = settled(reply)
    assert settlement.state == "applied" and settlement.result["version"] == 4
    assert settlement.result["rowsDeleted"] == 812 and settlement.result["fixture"] == "empty"


def test_a_malformed_reply_with_a_moved_target_is_applied_from_the_reread() -> None:
    settlement = settled(Reply(False, '{"id": "tn_a", "rowsDel'), tenant(4))
    assert settlement.state == "applied" and settlement.result["version"] == 4


@pytest.mark.parametrize("reread", [None, tenant(3)], ids=["reread-failed", "version-unmoved"])
def test_a_malformed_reply_without_proof_of_the_write_is_unknown(reread: dict[str, object] | None) -> None:
    settlement = settled(Reply(False, "OK"), reread)
    assert settlement.state == "unknown"
    error = settlement.error()
    assert error is not None and error.code == "outcome_unknown"


@pytest.mark.parametrize("version", ["4", 4.5, -4, True], ids=["string", "float", "negative", "bool"])
def test_a_reported_version_outside_the_schema_is_not_used_and_the_reread_decides(version: object) -> None:
    reply = Reply(False, json.dumps({"id": "tn_a", "rowsDeleted": 812, "rowsInserted": 0, "version": version}))
    applied = settled(reply, tenant(4))
    assert applied.state == "applied" and applied.result["version"] == 4
    assert settled(reply).state == "unknown"  # no fitting version anywhere: the write cannot be confirmed
    assert settled(reply, {**tenant(4), "version": "4"}).state == "unknown"


def test_reported_numbers_outside_their_schema_give_way_to_the_planned_ones() -> None:
    reply = Reply(False, json.dumps({"id": "tn_a", "rowsDeleted": -5, "rowsInserted": 0, "version": 4}))
    settlement = settled(reply)
    assert settlement.state == "applied" and settlement.result["rowsDeleted"] == 812


SAME = Seen(target_id="tn_a", version=3, protected=False, summary={"rowsDeleted": 812, "rowsInserted": 0})


@pytest.mark.parametrize(
    ("seen", "code"),
    [
        (SAME, None),
        (replace(SAME, version=4), "plan_stale"),
        (replace(SAME, target_id="tn_b"), "plan_stale"),
        (replace(SAME, summary={"rowsDeleted": 812, "rowsInserted": 5000}), "plan_stale"),
        (replace(SAME, summary={"rowsDeleted": 812, "rowsInserted": MISSING}), "plan_stale"),
        (replace(SAME, protected=True), "tenant_protected"),
    ],
    ids=["unchanged", "version", "id", "lookup-number", "lookup-gone", "protected"],
)
def test_a_plan_holds_only_while_its_id_version_and_numbers_hold(seen: Seen, code: str | None) -> None:
    if code is None:
        require_unchanged(PLAN, seen, PREVIEW, "tenant")
        return
    with pytest.raises(ToolError) as refused:
        require_unchanged(PLAN, seen, PREVIEW, "tenant")
    assert refused.value.wire_code == code


def test_a_lost_reply_is_unknown_with_the_current_target() -> None:
    settlement = settled(LOST, tenant(4))
    error = settlement.error()
    assert settlement.state == "unknown" and error is not None
    assert error.details == {"current": tenant(4)}


def test_an_is_error_reply_is_a_backend_error() -> None:
    settlement = settled(Reply(True, "Internal error: storage unavailable"))
    error = settlement.error()
    assert settlement.state == "error" and error is not None and error.code == "backend_error"
    assert "storage" not in error.message


def test_protection_comes_from_a_field_or_an_id_glob() -> None:

    from gateway.config import PreviewTool
    from tests.support.profiles import FLAGS

    preview = load_config(FLAGS.config).tools[FLAGS.preview_tool]
    assert isinstance(preview, PreviewTool)
    target = preview.target
    assert target.is_protected("prod.anything", {"meta": {"locked": False}})
    assert target.is_protected("checkout.x", {"meta": {"locked": True}})
    assert not target.is_protected("checkout.x", {"meta": {"locked": False}})
    assert not target.is_protected("production.x", {"meta": {"locked": "yes"}})


@pytest.mark.parametrize(
    ("answer", "used_up"),
    [
        (types.ElicitResult(action="decline"), True),
        (types.ElicitResult(action="cancel"), True),
        (None, False),  # no answer in time: the user may not have seen it
        (types.ElicitResult(action="accept", content={"confirm": False}), False),
        (types.ElicitResult(action="accept", content={"confirm": True}), False),
    ],
)
def test_a_decline_or_cancel_uses_the_plan_up_and_nothing_else_does(
    answer: types.ElicitResult | None, used_up: bool
) -> None:
    assert uses_up_plan(answer) is used_up
    if used_up:
        with pytest.raises(ToolError) as refused:
            require_yes(answer, "form", PLAN, PREVIEW)
        assert (refused.value.code, refused.value.next_tool) == ("not_confirmed", PREVIEW)
