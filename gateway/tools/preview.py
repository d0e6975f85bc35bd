"""A preview tool: the first step of a write. It reads the target, computes the effect and issues a plan.

The plan (gateway.records.Plan) is bound to the caller and the write tool, holds the target's version and the
numbers the confirmation will state, and expires. Nothing changes in the backend.

Every value the plan takes from the backend is checked where it enters: the target's id as the backend spells
it (which the plan, protection, the approval rules, the lock and the audit use from here on, whatever spelling
the caller sent), its version, and the summary numbers (read afresh, lookups included), each against the schema
the tool publishes for it. A value that does not fit gives backend_error and no plan.

The mode the write will need (form, typed, url) is decided here by the write tool's approval rules and kept on the
plan; the choice, a ``deny`` that refuses the plan and the counting of the plan against the write budgets are the
write package's (gateway.write.choice.at_preview).
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from gateway.approvals.policy import Choice, decided_by
from gateway.backend.reads import TargetReader
from gateway.catalog.published import PublishedTool
from gateway.config import PreviewTool
from gateway.config.expressions import MISSING
from gateway.errors import Code, ToolError
from gateway.records import Plan
from gateway.runtime import Gateway
from gateway.text import rfc3339
from gateway.tools.kinds.plans import write_of
from gateway.write.choice import at_preview


async def preview(gw: Gateway, name: str, config: PreviewTool, args: dict[str, Any], caller: str) -> dict[str, Any]:
    """Compute a write's effect and store a caller-bound, expiring plan for it. Changes nothing in the backend."""
    state, summary = await effect(gw.reader_for(name), gw.fresh_lookup, config, args)
    target_id, version = config.target.id_in(state), config.target.version_in(state)
    fitting = {config.target_input: target_id, **summary, config.target.version_output: version}
    _require_fitting(await gw.tool(name), fitting)
    arguments = {**args, config.target_input: target_id}
    write_name, write = write_of(gw.config, name)
    choice = await at_preview(gw, write_name, write, caller, target_id, state, summary, arguments)
    unissued = Plan("", caller, write_name, target_id, version, arguments, summary, config.plan_ttl_seconds)
    plan = await issued(gw, unissued, choice)
    return {
        "planId": plan.plan_id,
        **plan.arguments,
        **summary,
        "version": plan.version,
        "expiresAt": rfc3339(plan.expires_at),
        "approval": decided_by(choice),
    }


async def issued(gw: Gateway, unissued: Plan, choice: Choice) -> Plan:
    """The plan stored under a new id, expiring ``unissued.expires_at`` seconds (its TTL) from now, with the mode
    ``choice`` decided for it; counted in the metrics by write tool, mode and rule."""
    now = gw.clock()
    plan = replace(
        unissued,
        plan_id="pl_" + secrets.token_urlsafe(16),
        expires_at=now + unissued.expires_at,
        approval=choice.record(),
    )
    await gw.store.put_plan(plan, now)
    gw.metrics.plans.labels(plan.tool, choice.mode, choice.rule or "(tool)").inc()
    if choice.unevaluable is not None:
        gw.metrics.rules_failed_closed.labels(plan.tool, choice.unevaluable).inc()
    return plan


async def effect(
    reader: TargetReader,
    lookup: Callable[[str], Awaitable[dict[str, Any]]],
    config: PreviewTool,
    args: dict[str, Any],
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The target as it reads now and the numbers the plan will state (lookups read afresh); refuses a protected
    target, by the id as asked and as the backend spells it."""
    target = config.target
    requested = args[config.target_input]
    state = await reader.get(target, requested)
    target_id = target.id_in(state)
    if target.is_protected(requested, state) or (target_id is not MISSING and target.is_protected(target_id, state)):
        raise ToolError(
            Code.TARGET_PROTECTED,
            f"{requested} is protected; the gateway will not plan a change to it.",
            noun=target.noun,
        )
    tables = {name: await lookup(name) for name in config.lookups_used}
    summary = config.summary_of(args, state, tables)
    for field_name, value in summary.items():
        if value is MISSING:
            raise ToolError(Code.BACKEND_ERROR, f"The backend gave no value for {field_name}. Nothing was changed.")
    return state, summary


def _require_fitting(published: PublishedTool, values: dict[str, Any]) -> None:
    """Refuse a plan whose values from the backend are missing or do not fit the schemas the tool publishes."""
    for field, value in values.items():
        if value is MISSING:
            raise ToolError(Code.BACKEND_ERROR, f"The backend gave no value for {field}. Nothing was changed.")
        if not published.fits(field, value):
            raise ToolError(
                Code.BACKEND_ERROR, f"The backend gave a {field} outside its declared schema. Nothing was changed."
            )
