"""Which confirmation a write needs: a tool's ordered approval rules (a planned write's, decided for its plan at
preview time; a pass-through write's, when it is called) and, for the rules that read the write counters (or are
marked ``recheck``), again when the write is called (``tightened``: the stricter of the two wins, so a write's
mode only ever tightens; a ``deny`` then refuses the write).

Each rule is a CEL condition (compiled when the config loads, gateway/config/approvals.py) and a mode: ``form``
(the client's yes/no form), ``typed`` (the client's form, typing the target id), ``url`` (people on the approval
page, with ``approvers`` and ``four_eyes``) or ``deny``. The first rule whose condition holds decides; when none
holds, the tool's own ``confirm`` applies. A condition reads:

    caller     {id, client, subject, issuer, scopes}     who asks (scopes: every scope when there is no token)
    tool       the write tool's name
    target     the target as the backend reported it, plus its ``id``
    summary    the plan's numbers (rowsDeleted, ...)
    arguments  the preview's arguments
    writes     {caller, tool, caller_tool, all} x {minute, hour, day}: plans issued in those windows (each counts
               from its issue on, whether it is then applied, its outcome unknown, or left unused) and pass-through
               writes claimed in them, counted in the store (shared by replicas on Redis); a write does not count
               its own plan against itself
    rows       the same scopes and windows, summing the rows those writes touch: a statement tool's plan counts
               the rows its measure counted (other writes count 0), so ``rows.caller.hour + statement.rows >
               10000`` budgets rows as ``writes`` budgets statements; a write does not count its own rows
    statement  a statement tool's write (gateway.config.statements): its ``class`` (insert, update, delete, ddl,
               truncate), ``keyword``, normalised ``text``, ``digest``, the ``tables`` it touches, those it
               ``written``, the ``functions`` it calls, and the ``rows`` its measure counted; ``{}`` for other tools

A condition that cannot be evaluated for a plan (a field the target lacks, a type mismatch) fails closed: the
plan gets the strictest of that rule, every later rule and the tool's own ``confirm`` (``STRICTNESS``: form, typed,
url, deny; then more approvers, then four eyes), or the rule's own ``on_error`` mode when the operator set one.
``Choice.unevaluable`` names the rule, for the preview's output, the audit and the metrics. The choice is stored
in the plan (``Plan.approval``), so a config changed later cannot weaken a plan already issued.

Conditions see what the backend reports (``target``) and the plan's numbers computed from it (``summary``): a
backend that misreports a field picks the mode that field implies. That includes its type: CEL compares values of
two types as merely unequal, so ``target.env != "prod"`` holds for a target whose ``env`` the backend reports as
``["prod"]`` (an ordering or arithmetic across types raises, and fails closed). Every other fact has a known type:
``summary`` fits the preview's published schema before any rule runs, ``arguments`` fit the input schema,
``caller``, ``tool``, ``writes`` and ``rows`` are the gateway's own. Protections that must hold whatever the backend
says belong on ids, arguments and scopes (``arguments``, ``target.id``, ``caller``), which the gateway itself knows.
(Approver conditions declare their claims' types: gateway/config/claim_types.py.)
"""

from __future__ import annotations

import logging
import re
from dataclasses import asdict, dataclass, replace
from functools import cache
from typing import Any

from gateway.config import ApprovalRule, ConfirmedTool
from gateway.config.approvals import compile_condition
from gateway.errors import UNAVAILABLE, Code, ToolError, authorization_denial
from gateway.records import WRITE_WINDOWS

log = logging.getLogger(__name__)

COUNTERS = {"writes": re.compile(r"(?<![\w.])writes\b"), "rows": re.compile(r"(?<![\w.])rows\b")}
"""The counters a condition reads, found by name (``statement.rows`` is a statement's fact, not a counter)."""


@dataclass(frozen=True)
class Choice:
    """The confirmation a plan gets: ``mode`` is form, typed, url or deny; ``rule`` None for the tool's own."""

    mode: str
    rule: str | None
    approvers: int = 1
    four_eyes: bool = False
    notify: str | None = None
    unevaluable: str | None = None
    """The rule whose condition could not be evaluated, when the choice failed closed because of it."""

    def record(self) -> dict[str, Any]:
        """As a plan keeps it."""
        return asdict(self)


@dataclass(frozen=True)
class Evaluation:
    """One rule's verdict for one plan, for ``check --explain``."""

    rule: str
    holds: bool
    error: str | None = None


STRICTNESS = ("form", "typed", "url", "deny")
"""The modes from the weakest to the strictest."""


def strictness(choice: Choice) -> tuple[int, int, bool]:
    """How strict a choice is: its mode first, then how many people, then whether four eyes are needed."""
    return STRICTNESS.index(choice.mode), choice.approvers, choice.four_eyes


def choose(tool: ConfirmedTool, facts: dict[str, Any]) -> tuple[Choice, list[Evaluation]]:
    """The first rule that holds decides, and one that cannot be evaluated fails closed (see the module
    docstring); the rules evaluated on the way, in order."""
    evaluations = []
    own = Choice(tool.confirm, None, tool.approvers, tool.four_eyes)
    for index, rule in enumerate(tool.approval):
        holds, error = _holds(rule, facts)
        evaluations.append(Evaluation(rule.name, holds, error))
        if error is not None:
            return _failed_closed(tool, index, own), evaluations
        if holds:
            return _chosen_by(rule, rule.mode), evaluations
    return own, evaluations


def _chosen_by(rule: ApprovalRule, mode: str) -> Choice:
    if mode != "url":
        return Choice(mode, rule.name)
    return Choice(mode, rule.name, rule.approvers, rule.four_eyes, rule.notify)


def _failed_closed(tool: ConfirmedTool, index: int, own: Choice) -> Choice:
    """The choice when rule ``index`` cannot be evaluated: its ``on_error``, or the strictest from it on."""
    rule = tool.approval[index]
    if rule.on_error is not None:
        return replace(_chosen_by(rule, rule.on_error), unevaluable=rule.name)
    candidates = [_chosen_by(later, later.mode) for later in tool.approval[index:]] + [own]
    return replace(max(candidates, key=strictness), unevaluable=rule.name)


def denial(choice: Choice, when: str) -> ToolError:
    """The refusal of a plan or a write by a ``deny`` rule (a budget spent, say), naming the rule; no
    authorization lets it through (a structured denial, unavailable)."""
    return ToolError(
        Code.DENIED,
        f"The approval rule {choice.rule!r} denies this write {when}. Nothing was changed; do not retry it.",
        details={"rule": choice.rule},
        authorization=authorization_denial(UNAVAILABLE),
    )


def rechecked(tool: ConfirmedTool) -> list[ApprovalRule]:
    """The rules evaluated again when the write is called: those that read the write counters, and those the
    operator marked ``recheck``."""
    return [rule for rule in tool.approval if rule.recheck or reads_counters(rule.when)]


def tightened(choice: Choice, tool: ConfirmedTool, facts: dict[str, Any]) -> Choice:
    """The plan's choice, or a stricter one if a rechecked rule decides so now (the first that holds, or one
    that cannot be evaluated, failing closed among the rechecked rules): a write's mode only ever tightens."""
    rules = rechecked(tool)
    for index, rule in enumerate(rules):
        holds, error = _holds(rule, facts)
        if error is not None:
            strictest = _chosen_by(rule, rule.on_error) if rule.on_error is not None else None
            if strictest is None:
                strictest = max((_chosen_by(later, later.mode) for later in rules[index:]), key=strictness)
            return max(choice, replace(strictest, unevaluable=rule.name), key=strictness)
        if holds:
            return max(choice, _chosen_by(rule, rule.mode), key=strictness)
    return choice


def without_own_plan(writes: dict[str, dict[str, int]], issued_ago: float, own: int = 1) -> dict[str, dict[str, int]]:
    """Counters as a write sees them: a plan is counted when it is issued, so its own count (``own``: 1 write, or
    its rows), in each window that still holds it, is taken out (its write must not count against itself)."""
    return {
        scope: {
            window: max(0, count - (own if issued_ago < WRITE_WINDOWS[window] else 0))
            for window, count in counts.items()
        }
        for scope, counts in writes.items()
    }


def decided_by(choice: Choice) -> dict[str, str]:
    """What decided a plan's mode, as the preview's output and the audit show it: ``mode``, the ``rule`` (left
    out for the tool's own ``confirm``) and the rule that was ``unevaluable``, if the choice failed closed."""
    named = {"rule": choice.rule, "unevaluable": choice.unevaluable}
    return {"mode": choice.mode, **{key: value for key, value in named.items() if value is not None}}


def weaker_rules(tool: ConfirmedTool) -> list[ApprovalRule]:
    """The rules whose mode is weaker than the tool's own ``confirm`` (``check`` warns about each)."""
    own = STRICTNESS.index(tool.confirm)
    return [rule for rule in tool.approval if STRICTNESS.index(rule.mode) < own]


def facts(
    caller: dict[str, Any],
    tool: str,
    target_id: str,
    state: dict[str, Any],
    summary: dict[str, Any],
    arguments: dict[str, Any],
    writes: dict[str, dict[str, int]],
    statement: dict[str, Any] | None = None,
    rows: dict[str, dict[str, int]] | None = None,
) -> dict[str, Any]:
    """What a condition reads (see the module docstring)."""
    return {
        "caller": caller,
        "tool": tool,
        "target": {**state, "id": target_id},
        "summary": summary,
        "arguments": arguments,
        "writes": writes,
        "rows": rows or {},
        "statement": statement or {},
    }


def reads_counters(condition: str, counter: str | None = None) -> bool:
    """Whether a condition reads the counters (``writes`` or ``rows``), or the one named."""
    return any(pattern.search(condition) for name, pattern in COUNTERS.items() if counter in (None, name))


def counts_writes(tool: ConfirmedTool, counter: str | None = None) -> bool:
    """Whether any rule reads the counters, or the one named (only then does a preview read it from the store)."""
    return any(reads_counters(rule.when, counter) for rule in tool.approval)


def from_plan(record: dict[str, Any] | None, tool: ConfirmedTool) -> Choice:
    """The choice a plan carries (a plan from before rules existed: the tool's own setting)."""
    if not record:
        return Choice(tool.confirm, None, tool.approvers, tool.four_eyes)
    if record.get("mode") == "boolean":  # a plan previewed by a version that spelled the form so
        record = {**record, "mode": "form"}
    return Choice(**record)


def scopes_for(caller: str, tool: str) -> dict[str, str]:
    """The counter scopes a write is counted under, by the name a condition reads them by."""
    return {
        "caller": f"caller:{caller}",
        "tool": f"tool:{tool}",
        "caller_tool": f"caller_tool:{caller}\n{tool}",
        "all": "all",
    }


def _holds(rule: ApprovalRule, facts: dict[str, Any]) -> tuple[bool, str | None]:
    try:
        result = _program(rule.when).execute(facts)
    except (KeyError, TypeError, ValueError, RuntimeError) as exc:
        message = f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
        log.warning("approval rule %s could not be evaluated (%s); the plan fails closed", rule.name, message)
        return True, message
    if not isinstance(result, bool):
        message = f"the condition gave {type(result).__name__}, not a bool"
        log.warning("approval rule %s could not be evaluated (%s); the plan fails closed", rule.name, message)
        return True, message
    return result, None


@cache
def _program(expression: str) -> Any:
    return compile_condition(expression)
