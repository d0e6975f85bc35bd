"""The read-only tools: a bounded page of tenants, and a preview that issues a plan."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime
from typing import Any

from gateway.config import PreviewTool, ReadTool
from gateway.errors import ToolError
from gateway.runtime import Gateway
from gateway.stores import Plan


async def list_page(gw: Gateway, name: str, config: ReadTool, args: dict[str, Any]) -> dict[str, Any]:
    """One page of tenants ordered by id, after the cursor's position."""
    limit = args.get("limit", config.default_limit)
    after = gw.cursors.decode(name, args["cursor"]) if "cursor" in args else None
    tenants = sorted(await gw.reader.all(config.action, config.items_key), key=lambda tenant: tenant.id)
    remaining = [tenant for tenant in tenants if after is None or tenant.id > after]
    page = remaining[:limit]
    body: dict[str, Any] = {config.items_key: [tenant.as_json() for tenant in page]}
    if len(remaining) > limit:
        body["nextCursor"] = gw.cursors.encode(name, page[-1].id)
    return body


async def preview(gw: Gateway, name: str, config: PreviewTool, args: dict[str, Any], caller: str) -> dict[str, Any]:
    """Compute a reset's effect and store a caller-bound, expiring plan for it. Changes no tenant."""
    fixtures = await gw.reader.fixtures(config.fixtures_action)
    fixture = args["fixture"]
    if fixture not in fixtures:
        raise ToolError("invalid_arguments", f"Unknown fixture {fixture!r}. Use one of: {', '.join(fixtures)}.")
    tenant = await gw.reader.get(config.read_action, args["tenantId"])
    if tenant.protected:
        raise ToolError("tenant_protected", f"{tenant.id} is protected; the gateway will not plan a reset for it.")
    now = gw.clock()
    plan = Plan(
        plan_id="pl_" + secrets.token_urlsafe(16),
        caller=caller,
        tool=gw.config.write_tool_for(name),
        target=tenant.id,
        fixture=fixture,
        version=tenant.version,
        rows_deleted=tenant.rows,
        rows_inserted=fixtures[fixture],
        expires_at=now + config.plan_ttl_seconds,
    )
    await gw.store.put_plan(plan, now)
    return {
        "planId": plan.plan_id,
        "tenantId": plan.target,
        "fixture": plan.fixture,
        "rowsDeleted": plan.rows_deleted,
        "rowsInserted": plan.rows_inserted,
        "version": plan.version,
        "expiresAt": rfc3339(plan.expires_at),
    }


def rfc3339(timestamp: float) -> str:
    """UTC time as ``2026-12-02T18:30:00Z``."""
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
