"""Facts of the MCP protocol the gateway speaks, shared by the MCP surface (gateway.mcp) and the write path
(gateway.write) so that neither imports the other for them.

    STATELESS_ERA    the first revision without server-to-client requests (asking is InputRequiredResult)
    stateless        whether a request's protocol version is of that era or later
    TASKS_EXTENSION  the tasks extension's identifier, as clients declare it and the server advertises it
    TOOL_APPROVAL_EXTENSION, DISPOSITION_META, MODEL_RESPONSE_META
                     the tool-approval extension (the SEP-2848 draft, experimental: gateway.mcp.approval) and the
                     ``_meta`` keys of its task's disposition and of its sentence for the model
    resuming         the task whose call the gateway is making again itself (None: a client's own call)

Bottom floor: imports nothing from gateway (the SDK's pure ``mcp_types`` only).
"""

from __future__ import annotations

from contextvars import ContextVar

from mcp_types.version import is_version_at_least

STATELESS_ERA = "2026-07-28"
"""The first protocol revision without server-to-client requests: the user is asked by InputRequiredResult."""

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
TOOL_APPROVAL_EXTENSION = "io.modelcontextprotocol/tool-approval"
DISPOSITION_META = "io.modelcontextprotocol/tool-approval-disposition"
MODEL_RESPONSE_META = "io.modelcontextprotocol/model-immediate-response"

resuming: ContextVar[str | None] = ContextVar("gateway-resuming-task", default=None)
"""The task whose call the gateway is making again (set by gateway.mcp.tasks), or None for a client's own call."""


def stateless(version: str | None) -> bool:
    """Whether a request's protocol version is ``STATELESS_ERA`` or later."""
    return is_version_at_least(version or "", STATELESS_ERA)
