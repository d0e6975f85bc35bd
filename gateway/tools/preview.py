"""A preview tool: the first step of a write. It reads the target, computes the effect and issues a plan.

The plan (gateway.records.Plan) is bound to the caller and the write tool, holds the target's version and the
numbers the confirmation will state, and expires. Nothing changes in the backend.

Every value the plan takes from the backend is checked where it enters: the target's id as the backend spells
it (which the plan, protection, the lock and the audit use from here on, whatever spelling the caller sent), its
version, and the summary numbers (read afresh, lookups included), each against the schema the tool publishes
for it. A value that does not fit gives backend_error and no plan.
"""

from __future__ import annotations

import secrets
from datetime import UTC, datetime
from typing import Any

from gateway.catalog import PublishedTool
from gateway.config import PreviewTool
from gateway.errors import Code, ToolError
from gateway.records import Plan
from gateway.runtime import Gateway
from gateway.templates import MISSING


async def preview(gw: Gateway, name: str, config: PreviewTool, args: dict[str, Any], caller: str) -> dict[str, Any]:
    """Compute a write's effect and store a caller-bound, expiring plan for it. Changes nothing in the backend."""
    target, target_input = config.target, config.target_input
    requested = args[target_input]
    state = await gw.reader.get(target, requested)
    target_id = target.id_in(state)
    if target.is_protected(requested, state) or (target_id is not MISSING and target.is_protected(target_id, state)):
        raise ToolError(Code.TENANT_PROTECTED, f"{requested} is protected; the gateway will not plan a change to it.")
    tables = await gw.reader.fresh_lookups(config.lookups_used, gw.config.lookups)
    summary = config.summary_of(args, state, tables)
    version = target.version_in(state)
    _require_fitting((await gw.catalog())[name], {target_input: target_id, **summary, "version": version})
    now = gw.clock()
    plan = Plan(
        plan_id="pl_" + secrets.token_urlsafe(16),
        caller=caller,
        tool=gw.config.write_tool_for(name),
        target=target_id,
        version=version,
        arguments={**args, target_input: target_id},
        summary=summary,
        expires_at=now + config.plan_ttl_seconds,
    )
    await gw.store.put_plan(plan, now)
    return {
        "planId": plan.plan_id,
        **plan.arguments,
        **summary,
        "version": plan.version,
        "expiresAt": rfc3339(plan.expires_at),
    }


def _require_fitting(published: PublishedTool, values: dict[str, Any]) -> None:
    """Refuse a plan whose values from the backend are missing or do not fit the schemas the tool publishes."""
    for field, value in values.items():
        if value is MISSING:
            raise ToolError(Code.BACKEND_ERROR, f"The backend gave no value for {field}. Nothing was changed.")
        if not published.fits(field, value):
            raise ToolError(
                Code.BACKEND_ERROR, f"The backend gave a {field} outside its declared schema. Nothing was changed."
            )


def rfc3339(timestamp: float) -> str:
    """UTC time as ``2026-12-02T18:30:00Z``."""
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
