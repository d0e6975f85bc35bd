"""Which confirmation a plan needs: a write tool's ordered approval rules, decided once, at preview time.

Each rule is a CEL condition (compiled when the config loads, gateway/config/approvals.py) and a mode: ``form``
(the client's yes/no form), ``typed`` (the client's form, typing the target id), ``url`` (people on the approval
page, with ``approvers`` and ``four_eyes``) or ``deny``. The first rule whose condition holds decides; when none
holds, the tool's own ``confirm`` applies. A condition reads:

    caller     {id, client, subject, issuer, scopes}     who asks (scopes: every scope when there is no token)
    tool       the write tool's name
    target     the target as the backend reported it, plus its ``id``
    summary    the plan's numbers (rowsDeleted, ...)
    arguments  the preview's arguments
    writes     {caller, tool, caller_tool, all} x {minute, hour, day}: writes applied (or with an unknown outcome)
               in those windows, counted in the store (shared by replicas on Redis)

A condition that cannot be evaluated for a plan (a field the target lacks, a type mismatch) counts as holding:
its rule, usually a stricter one, applies rather than a weaker one further down. The choice is stored in the plan
(``Plan.approval``), so a config changed later cannot weaken a plan already issued.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from functools import cache
from typing import Any

from gateway.config import ApprovalRule, WriteTool
from gateway.config.approvals import compile_condition

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Choice:
    """The confirmation a plan gets: ``mode`` is form, typed, url or deny; ``rule`` None for the tool's own."""

    mode: str
    rule: str | None
    approvers: int = 1
    four_eyes: bool = False
    notify: str | None = None

    def record(self) -> dict[str, Any]:
        """As a plan keeps it."""
        return asdict(self)


@dataclass(frozen=True)
class Evaluation:
    """One rule's verdict for one plan, for ``check --explain``."""

    rule: str
    holds: bool
    error: str | None = None


def choose(tool: WriteTool, facts: dict[str, Any]) -> tuple[Choice, list[Evaluation]]:
    """The first rule that holds decides; the rules evaluated on the way, in order."""
    evaluations = []
    for rule in tool.approval:
        holds, error = _holds(rule, facts)
        evaluations.append(Evaluation(rule.name, holds, error))
        if holds:
            return Choice(rule.mode, rule.name, rule.approvers, rule.four_eyes, rule.notify), evaluations
    return Choice(tool.confirm, None, tool.approvers, tool.four_eyes), evaluations


def facts(
    caller: dict[str, Any],
    tool: str,
    target_id: str,
    state: dict[str, Any],
    summary: dict[str, Any],
    arguments: dict[str, Any],
    writes: dict[str, dict[str, int]],
) -> dict[str, Any]:
    """What a condition reads (see the module docstring)."""
    return {
        "caller": caller,
        "tool": tool,
        "target": {**state, "id": target_id},
        "summary": summary,
        "arguments": arguments,
        "writes": writes,
    }


def counts_writes(tool: WriteTool) -> bool:
    """Whether any rule reads the write counters (only then does a preview read them from the store)."""
    return any("writes" in rule.when for rule in tool.approval)


def from_plan(record: dict[str, Any] | None, tool: WriteTool) -> Choice:
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
        log.warning("approval rule %s could not be evaluated (%s); it holds", rule.name, message)
        return True, message
    if not isinstance(result, bool):
        return True, f"the condition gave {type(result).__name__}, not a bool"
    return result, None


@cache
def _program(expression: str) -> Any:
    return compile_condition(expression)
