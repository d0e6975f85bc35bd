"""A preview tool: the first step of a write. It reads the target, computes the effect and issues a plan.

The plan (gateway.records.Plan) is bound to the caller and the write tool, holds the target's version and the
numbers the confirmation will state, and expires. Nothing changes in the backend.
"""

from __future__ import annotations

import secrets
from typing import Any

from gateway.config import PreviewTool
from gateway.errors import Code, ToolError
from gateway.records import Plan
from gateway.runtime import Gateway
from gateway.templates import MISSING, at_path
from gateway.text import rfc3339


async def preview(gw: Gateway, name: str, config: PreviewTool, args: dict[str, Any], caller: str) -> dict[str, Any]:
    """Compute a write's effect and store a caller-bound, expiring plan for it. Changes nothing in the backend."""
    target = config.target
    target_id = args[config.target_input]
    state = await gw.reader.get(target, target_id)
    if target.is_protected(target_id, state):
        raise ToolError(Code.TENANT_PROTECTED, f"{target_id} is protected; the gateway will not plan a change to it.")
    summary = {}
    for field_name, field in config.summary.items():
        if field.target is not None:
            value = at_path(state, field.target)
        else:
            assert field.lookup is not None and field.key is not None
            table = await gw.reader.lookup(field.lookup, gw.config.lookups[field.lookup])
            value = table.get(str(args.get(field.key)), MISSING)
        if value is MISSING:
            raise ToolError(Code.BACKEND_ERROR, f"The backend gave no value for {field_name}. Nothing was changed.")
        summary[field_name] = value
    now = gw.clock()
    plan = Plan(
        plan_id="pl_" + secrets.token_urlsafe(16),
        caller=caller,
        tool=gw.config.write_tool_for(name),
        target=target_id,
        version=target.version_in(state),
        arguments=dict(args),
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
