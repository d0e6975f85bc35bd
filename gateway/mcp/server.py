"""The MCP surface: lists the published tools and routes each call, never exposing the god-tool.

A call is observed (a span, its log line, its metrics), routed (a tool the caller may not see answers as unknown),
then passed through the ordered steps of gateway.mcp.chain to its tool.

A 2025-era connection that lists the tools is told when they change (a backend went down or came back:
gateway.catalog.live): its ``Connection`` (the SDK's connection-scoped object, reached through the request's
session as ``_connection``: private to mcp 2.3, pinned in pyproject.toml, guarded by tests/system/test_readiness.py)
gets ``notifications/tools/list_changed`` on its standalone stream, and the server says ``tools.listChanged``.
2026-era clients are stateless here and are not told.

Every call either succeeds with ``structuredContent`` plus the same JSON as text (checked against the
tool's outputSchema first), or fails with a coded ``isError`` result. An unknown tool is a JSON-RPC
-32602 error. Anything unexpected is logged here and answered with a generic -32603, so no exception text
or stack trace reaches a client.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from typing import Any

import mcp_types as types
from mcp.server import InitializationOptions, NotificationOptions, Server, ServerRequestContext
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.shared.exceptions import MCPError
from mcp_types.version import is_version_at_least

from gateway.catalog.published import PublishedTool
from gateway.errors import Code, StoreUnavailable, ToolError
from gateway.identity.caller import current_caller, current_scopes, is_visible, unknown_tool
from gateway.identity.principal import readable
from gateway.mcp import chain
from gateway.observability import logs, tracing
from gateway.runtime import Gateway
from gateway.tools.kinds import Request, kind_of
from gateway.write.ask.form import STATELESS_ERA

log = logging.getLogger(__name__)
calls_log = logging.getLogger("gateway.calls")

VERSION = "0.1.0"


def build_server(gw: Gateway) -> Server[Any]:
    """A low-level MCP server over a running gateway."""

    async def on_list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        if not is_version_at_least(ctx.protocol_version, STATELESS_ERA):  # a 2025 session can hear list_changed
            gw.listen(ctx.session._connection)  # the connection outlives this request's session object
        catalog = await gw.catalog()
        scopes = current_scopes()
        return types.ListToolsResult(
            tools=[published.tool for name, published in catalog.items() if is_visible(gw.config, name, scopes)]
        )

    async def on_call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        request_id = secrets.token_hex(8)  # the JSON-RPC id repeats (every terminal call is 2); this does not
        tool = params.name if params.name in gw.config.tools else "(unknown)"
        with logs.bound(request_id=request_id), tracing.span(f"tool {tool}", **{"gateway.request_id": request_id}):
            return await on_call_tool_logged(ctx, params, request_id)

    async def on_call_tool_logged(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams, request_id: str
    ) -> types.CallToolResult | types.InputRequiredResult:
        started = time.perf_counter()
        known = params.name in gw.config.tools
        outcome = "internal_error"
        try:
            result = await _answer(gw, ctx, params)
            outcome = outcome_label(result)
            return result
        except MCPError as err:
            outcome = "unknown_tool" if err.code == types.INVALID_PARAMS else "protocol_error"
            raise
        finally:
            seconds = time.perf_counter() - started
            tool = params.name if known else "(unknown)"  # never a label per unknown name a caller made up
            gw.metrics.calls.labels(tool, outcome).inc()
            gw.metrics.call_seconds.labels(tool).observe(seconds)
            caller = readable(current_caller(gw.config.gateway.stdio_caller))
            tracing.annotate(**{"gateway.caller": caller, "gateway.outcome": outcome})
            calls_log.info(
                "tools/call",
                extra={
                    "call": {
                        "request_id": request_id,
                        "rpc_id": str(ctx.request_id),
                        "caller": caller,
                        "tool": tool,
                        "outcome": outcome,
                        "ms": round(seconds * 1000, 2),
                        "protocol": ctx.protocol_version,
                    }
                },
            )

    server: Server[Any] = ListChangingServer(
        gw.config.gateway.name,
        version=VERSION,
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
        get_tool_input_schema=gw.cached_input_schema,
    )
    security = RequestStateSecurity(keys=gw.keys, ttl=_longest_prompt(gw))
    server.middleware.append(RequestStateBoundary(security, default_audience=gw.config.gateway.name))
    return server


async def _answer(
    gw: Gateway, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
) -> types.CallToolResult | types.InputRequiredResult:
    """Route a call; every refusal becomes a coded result, anything unexpected a generic -32603."""
    try:
        if params.name not in gw.config.tools or not is_visible(gw.config, params.name, current_scopes()):
            raise unknown_tool(params.name)
        return await _call(gw, await gw.tool(params.name), ctx, params)
    except ToolError as err:
        return error_result(err)
    except StoreUnavailable:
        return error_result(
            ToolError(Code.BACKEND_UNAVAILABLE, "The gateway's state store cannot be reached. Retry later.")
        )
    except MCPError:
        raise
    except Exception:
        log.exception("unexpected error in tools/call %s", params.name[:64])
        raise MCPError(code=types.INTERNAL_ERROR, message="Internal error") from None


def outcome_label(result: types.CallToolResult | types.InputRequiredResult) -> str:
    """A call's outcome for metrics and logs: an error code, applied / replayed, input_required, or ok."""
    if isinstance(result, types.InputRequiredResult):
        return "input_required"
    if result.is_error:
        block = result.content[0] if result.content else None
        return str(json.loads(block.text)["code"]) if isinstance(block, types.TextContent) else "error"
    body = result.structured_content or {}
    if "replayed" in body:
        return "replayed" if body["replayed"] else "applied"
    return "ok"


async def _call(
    gw: Gateway,
    published: PublishedTool,
    ctx: ServerRequestContext[Any, Any],
    params: types.CallToolRequestParams,
) -> types.CallToolResult | types.InputRequiredResult:
    request = Request(gw, published, current_caller(gw.config.gateway.stdio_caller), ctx, params)
    answer = await chain.run(chain.Call(request, kind_of(request)))
    if isinstance(answer, types.InputRequiredResult):
        return answer
    return _written(published, answer) if published.config.writes else _success(published, answer)


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


def error_result(err: ToolError) -> types.CallToolResult:
    """A refusal: ``isError`` with the JSON body as text and no ``structuredContent`` (some clients validate
    ``structuredContent`` even on error results)."""
    text = json.dumps(err.body(), separators=(",", ":"))
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


class ListChangingServer(Server[Any]):
    """The low-level server, telling 2025-era clients that its tool list changes (a backend that goes down takes
    its tools away, and brings them back). mcp 2.3 takes that flag only where the initialize answer is built."""

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        options = notification_options or NotificationOptions(tools_changed=True)
        return super().create_initialization_options(options, experimental_capabilities, extensions)


def _longest_prompt(gw: Gateway) -> float:
    timeouts = [seconds for tool in gw.config.tools.values() if (seconds := tool.prompt_seconds()) is not None]
    return max(timeouts, default=300.0)
