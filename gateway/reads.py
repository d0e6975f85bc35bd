"""The read-only tools: a bounded page of a backend list, and a preview that issues a plan."""

from __future__ import annotations

import secrets
from bisect import bisect_right
from datetime import UTC, datetime
from typing import Any

from gateway.config import PreviewTool, ReadTool
from gateway.errors import ToolError
from gateway.runtime import Gateway
from gateway.stores import Plan
from gateway.targets import is_protected, order, version_of
from gateway.templates import MISSING, at_path


async def list_page(gw: Gateway, name: str, config: ReadTool, args: dict[str, Any]) -> dict[str, Any]:
    """One page ordered by the sort key, after the cursor's position, projected to the declared fields.

    A first page reads the backend's list afresh; a page after a cursor is cut from the list as it was read
    moments ago (see gateway.targets), never re-read per page.
    """
    # JSON Schema's "integer" admits 1.0 (an integral number): the schema check has passed, so int() is exact.
    limit = int(args.get("limit", config.default_limit))
    after = gw.cursors.decode(name, args["cursor"]) if "cursor" in args else None
    listing = await gw.reader.listing(
        name, config.call, config.sort_key, fresh=after is None, now=gw.clock(), max_age=config.listing_seconds
    )
    start = 0 if after is None else bisect_right(listing.keys, order(after))
    page = listing.items[start : start + limit]
    body: dict[str, Any] = {config.items_key: [_project(config, item) for _, item in page]}
    if start + limit < len(listing.items):
        body["nextCursor"] = gw.cursors.encode(name, page[-1][0])
    return body


async def preview(gw: Gateway, name: str, config: PreviewTool, args: dict[str, Any], caller: str) -> dict[str, Any]:
    """Compute a write's effect and store a caller-bound, expiring plan for it. Changes nothing in the backend."""
    target = config.target
    target_id = args[config.target_input]
    state = await gw.reader.get(target, target_id)
    if is_protected(target, target_id, state):
        raise ToolError("tenant_protected", f"{target_id} is protected; the gateway will not plan a change to it.")
    summary = {}
    for field_name, field in config.summary.items():
        if field.target is not None:
            value = at_path(state, field.target)
        else:
            assert field.lookup is not None and field.key is not None
            table = await gw.reader.lookup(field.lookup, gw.config.lookups[field.lookup])
            value = table.get(str(args.get(field.key)), MISSING)
        if value is MISSING:
            raise ToolError("backend_error", f"The backend gave no value for {field_name}. Nothing was changed.")
        summary[field_name] = value
    now = gw.clock()
    plan = Plan(
        plan_id="pl_" + secrets.token_urlsafe(16),
        caller=caller,
        tool=gw.config.write_tool_for(name),
        target=target_id,
        version=version_of(target, state),
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


def _project(config: ReadTool, item: Any) -> dict[str, Any]:
    projected = {}
    for field_name, field in config.fields.items():
        value = at_path(item, field.source)
        if value is MISSING:
            raise ToolError("backend_error", f"The backend's list item has no {field.source}. Nothing was changed.")
        projected[field_name] = value
    return projected


def rfc3339(timestamp: float) -> str:
    """UTC time as ``2026-12-02T18:30:00Z``."""
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
