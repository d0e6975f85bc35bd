"""Approval rules fail closed: a condition that cannot be evaluated never yields a mode weaker than the tool's own
confirm, nor weaker than any rule after it (gateway/approvals/policy.py)."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.approvals.policy import STRICTNESS, Choice, choose, decided_by, strictness, weaker_rules
from gateway.config import ApprovalRule, WriteTool, load_config

FACTS: dict[str, Any] = {
    "caller": {"id": "agent"},
    "tool": "reset_tenant",
    "target": {"id": "tn_checkout01", "rows": 40},  # no `tier`
    "summary": {"rowsDeleted": 40},
    "arguments": {"fixture": "empty"},
    "writes": {"caller": {"minute": 0, "hour": 0, "day": 0}},
}
MISSING = 'target.tier == "sandbox"'  # reads a field the target lacks
HOLDS, FAILS = "summary.rowsDeleted > 10", "summary.rowsDeleted > 1000"


def tool(confirm: str, *rules: dict[str, Any]) -> WriteTool:
    write = load_config().tools["reset_tenant"]
    assert isinstance(write, WriteTool)
    return write.model_copy(update={"confirm": confirm, "approval": [ApprovalRule(**rule) for rule in rules]})


def rule(name: str, when: str, mode: str, **more: Any) -> dict[str, Any]:
    return {"name": name, "when": when, "mode": mode, **more}


@pytest.mark.parametrize("confirm", ["form", "typed", "url"])
@pytest.mark.parametrize("first", ["form", "typed", "url", "deny"])
@pytest.mark.parametrize("later", [None, "form", "typed", "url", "deny"])
def test_an_unevaluable_rule_never_yields_a_weaker_mode_than_what_follows(
    confirm: str, first: str, later: str | None
) -> None:
    rules = [rule("sandbox", MISSING, first)] + ([rule("later", FAILS, later)] if later else [])
    choice, evaluations = choose(tool(confirm, *rules), FACTS)
    floor = max(STRICTNESS.index(mode) for mode in [confirm, first, *([later] if later else [])])
    assert STRICTNESS.index(choice.mode) == floor
    assert choice.unevaluable == "sandbox"
    assert evaluations[0].error is not None
    assert decided_by(choice)["unevaluable"] == "sandbox"


def test_the_issue_case_a_weak_first_rule_on_a_missing_field_keeps_the_tools_url() -> None:
    """confirm = "url" and a first rule `target.tier == "sandbox" -> form`: a tenant without a tier asks people."""
    choice, _ = choose(tool("url", rule("sandbox", MISSING, "form")), FACTS)
    assert choice.mode == "url" and choice.rule is None and choice.unevaluable == "sandbox"


def test_among_url_choices_more_approvers_and_four_eyes_are_stricter() -> None:
    rules = [rule("sandbox", MISSING, "url"), rule("big", FAILS, "url", approvers=2, four_eyes=True)]
    choice, _ = choose(tool("url", *rules), FACTS)
    assert (choice.mode, choice.rule, choice.approvers, choice.four_eyes) == ("url", "big", 2, True)
    assert strictness(Choice("url", None, 2)) > strictness(Choice("url", None, 1, True))


def test_on_error_is_the_operators_own_choice() -> None:
    choice, _ = choose(tool("url", rule("sandbox", MISSING, "form", on_error="typed")), FACTS)
    assert (choice.mode, choice.rule, choice.unevaluable) == ("typed", "sandbox", "sandbox")


def test_an_earlier_rule_that_holds_still_decides_and_evaluable_rules_are_unchanged() -> None:
    choice, _ = choose(tool("url", rule("small", HOLDS, "form"), rule("sandbox", MISSING, "form")), FACTS)
    assert (choice.mode, choice.rule, choice.unevaluable) == ("form", "small", None)
    assert decided_by(choice) == {"mode": "form", "rule": "small"}


def test_a_condition_that_is_not_a_bool_fails_closed() -> None:
    choice, _ = choose(tool("typed", rule("count", "summary.rowsDeleted", "form")), FACTS)
    assert (choice.mode, choice.unevaluable) == ("typed", "count")


def test_check_names_every_rule_weaker_than_the_tools_confirm() -> None:
    write = tool("typed", rule("a", HOLDS, "form"), rule("b", HOLDS, "url"), rule("c", HOLDS, "deny"))
    assert [each.name for each in weaker_rules(write)] == ["a"]
