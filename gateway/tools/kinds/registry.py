"""The kind registry: every kind of tool, found by its config's ``kind``, in one dict built once.

    read         READ                a page of a backend list
    preview      PREVIEW             a plan for a write
    write        WRITE               a planned write
    passthrough  PASSTHROUGH         a backend's own tool: relayed (it only reads) or written (a ``Split``)
    statement_query    STATEMENT_QUERY    a read relayed to a statement-executing server, bounded
    statement_preview  STATEMENT_PREVIEW  a statement write classified and measured: a plan
    statement_execute  STATEMENT_EXECUTE  a planned statement, run once after a person's yes

tests/unit/test_kind_registry.py holds it to every ``kind`` the config accepts (gateway.config.TOOL_KINDS), both
sides of a split included. A new kind is its config model, its module here and its line in ``KINDS``.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types
from mcp.server import ServerRequestContext

from gateway.catalog.published import PublishedTool
from gateway.config import ToolConfig
from gateway.runtime import Gateway
from gateway.tools.kinds.kind import Entry, Kind, ToolCall
from gateway.tools.kinds.passthrough import PASSTHROUGH
from gateway.tools.kinds.preview import PREVIEW
from gateway.tools.kinds.read import READ
from gateway.tools.kinds.statement_execute import STATEMENT_EXECUTE
from gateway.tools.kinds.statement_preview import STATEMENT_PREVIEW
from gateway.tools.kinds.statement_query import STATEMENT_QUERY
from gateway.tools.kinds.write import WRITE

KINDS: dict[str, Entry] = {
    "read": READ,
    "preview": PREVIEW,
    "write": WRITE,
    "passthrough": PASSTHROUGH,
    "statement_query": STATEMENT_QUERY,
    "statement_preview": STATEMENT_PREVIEW,
    "statement_execute": STATEMENT_EXECUTE,
}


def kind_of(config: ToolConfig) -> Kind[Any, Any]:
    """The kind that carries out a tool of this config."""
    return KINDS[config.kind].of(config)


def routed(
    gw: Gateway,
    published: PublishedTool,
    caller: str,
    ctx: ServerRequestContext[Any, Any],
    params: types.CallToolRequestParams,
) -> ToolCall[Any]:
    """One call of a published tool, routed to its kind, which opens what it needs before admission."""
    kind = kind_of(published.config)
    return ToolCall(gw, published, caller, ctx, params, kind, kind.opened(gw, published, caller, ctx))
