"""A read tool: one bounded page of the backend's unbounded list, ordered by its sort key, with a signed cursor."""

from __future__ import annotations

from bisect import bisect_right
from typing import Any

from gateway.backend.reads import order
from gateway.config import ReadTool
from gateway.config.expressions import MISSING, at_path
from gateway.errors import Code, ToolError
from gateway.runtime import Gateway


async def list_page(gw: Gateway, name: str, config: ReadTool, args: dict[str, Any]) -> dict[str, Any]:
    """One page ordered by the sort key, after the cursor's position, projected to the declared fields.

    A first page reads the backend's list afresh; a page after a cursor is cut from the list as it was read
    moments ago (see gateway.backend.reads), never re-read per page.
    """
    # JSON Schema's "integer" admits 1.0 (an integral number): the schema check has passed, so int() is exact.
    limit = int(args.get("limit", config.default_limit))
    after = gw.cursors.decode(name, args["cursor"]) if "cursor" in args else None
    listing = await gw.reader_for(name).listing(
        name, config.call, config.sort_key, fresh=after is None, now=gw.clock(), max_age=config.listing_seconds
    )
    start = 0 if after is None else bisect_right(listing.keys, order(after))
    page = listing.items[start : start + limit]
    body: dict[str, Any] = {config.items_key: [_project(config, item) for _, item in page]}
    if start + limit < len(listing.items):
        body["nextCursor"] = gw.cursors.encode(name, page[-1][0])
    return body


def _project(config: ReadTool, item: Any) -> dict[str, Any]:
    projected = {}
    for field_name, field in config.fields.items():
        value = at_path(item, field.source)
        if value is MISSING:
            raise ToolError(Code.BACKEND_ERROR, f"The backend's list item has no {field.source}. Nothing was changed.")
        projected[field_name] = value
    return projected
