"""One tool call, routed and answered in codes: what the ``tools/call`` handler and a resumed task both run.

    answer   route the call (a tool the caller may not see answers as unknown, -32602), pass it through the ordered
             steps of gateway.mcp.chain to its tool, and turn the outcome into the MCP answer: a result (checked
             against the tool's outputSchema), a coded refusal, a request for input, or a task to follow

Anything unexpected is logged here and answered with a generic -32603, so no exception text or stack trace reaches
a client.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import mcp_types as types
from mcp.server import ServerRequestContext
from mcp.shared.exceptions import MCPError

from gateway.catalog.published import PublishedTool
from gateway.errors import AUTHORIZATION_META, AVAILABLE, Code, StoreUnavailable, ToolError
from gateway.identity.caller import current_caller, current_scopes, is_visible, unknown_tool
from gateway.mcp import chain
from gateway.protocol import stateless
from gateway.records import Task
from gateway.runtime import Gateway
from gateway.tools.kinds.registry import routed

Answered = types.CallToolResult | types.InputRequiredResult | Task

log = logging.getLogger(__name__)


async def answer(gw: Gateway, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams) -> Answered:
    """Route a call; every refusal becomes a coded result, anything unexpected a generic -32603."""
    try:
        if params.name not in gw.config.tools or not is_visible(gw.config, params.name, current_scopes()):
            raise unknown_tool(params.name)
        return await _call(gw, await gw.tool(params.name), ctx, params)
    except ToolError as err:
        return error_result(err, tasks=stateless(ctx.protocol_version))
    except StoreUnavailable:
        message = "The gateway's state store cannot be reached; nothing was sent. Retry later."
        return error_result(ToolError(Code.STORE_UNAVAILABLE, message))
    except MCPError:
        raise
    except Exception:
        log.exception("unexpected error in tools/call %s", params.name[:64])
        raise MCPError(code=types.INTERNAL_ERROR, message="Internal error") from None


async def _call(
    gw: Gateway,
    published: PublishedTool,
    ctx: ServerRequestContext[Any, Any],
    params: types.CallToolRequestParams,
) -> Answered:
    call = routed(gw, published, current_caller(gw.config.gateway.stdio_caller), ctx, params)
    answered = await chain.run(call)
    if not isinstance(answered, dict):
        return answered
    return _written(published, answered) if call.audited is not None else _success(published, answered)


def _success(published: PublishedTool, body: dict[str, Any]) -> types.CallToolResult:
    published.validate_output(body)
    return success_result(body)


def _written(published: PublishedTool, body: dict[str, Any]) -> types.CallToolResult:
    # The write has happened and is recorded under its key: a schema slip must not turn it into an error.
    try:
        published.validate_output(body)
    except ValueError:
        log.error("%s result does not match its outputSchema; returned as recorded", published.name)
    return success_result(body)


def success_result(body: dict[str, Any]) -> types.CallToolResult:
    """A success carries ``structuredContent`` and the same JSON as text."""
    text = json.dumps(body, separators=(",", ":"))
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], structured_content=body)


def error_result(err: ToolError, *, tasks: bool = False) -> types.CallToolResult:
    """A refusal: ``isError`` with the JSON body as text and no ``structuredContent`` (some clients validate
    ``structuredContent`` even on error results); one whose way out is an authorization carries its structured
    denial in ``_meta`` (gateway.errors), naming a task as a way too where the era has them (``tasks``: a client
    that declared the tasks extension would have been answered with one)."""
    text = json.dumps(err.body(), separators=(",", ":"))
    envelope = err.authorization
    if envelope is not None and tasks and err.code is Code.APPROVAL_PENDING and envelope["remediation"] == AVAILABLE:
        envelope = {**envelope, "remediationHints": [*envelope.get("remediationHints", []), {"type": "task"}]}
    meta = {AUTHORIZATION_META: envelope} if envelope is not None else None
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True, _meta=meta)


def error_code(result: types.CallToolResult) -> str | None:
    """The code of a coded refusal, or None for a success."""
    if not result.is_error:
        return None
    block = result.content[0] if result.content else None
    return str(json.loads(block.text)["code"]) if isinstance(block, types.TextContent) else "error"


def outcome_label(result: Answered) -> str:
    """A call's outcome for metrics and logs: an error code, applied / replayed, input_required, task, or ok."""
    if isinstance(result, types.InputRequiredResult):
        return "input_required"
    if isinstance(result, Task):
        return "task"
    if result.is_error:
        return error_code(result) or "error"
    body = result.structured_content or {}
    if "replayed" in body:
        return "replayed" if body["replayed"] else "applied"
    return "ok"
