"""The MCP surface: lists the published tools and routes each call, never exposing the god-tool.

A call is observed here (a span, its log line, its metrics), then answered by gateway.mcp.calls: routed (a tool
the caller may not see answers as unknown) and passed through the ordered steps of gateway.mcp.chain to its tool.
Every call either succeeds with ``structuredContent`` plus the same JSON as text (checked against the tool's
outputSchema first), fails with a coded ``isError`` result, asks for input (2026 rounds), or, for a url-mode
write a client follows as a task, answers a task (gateway.mcp.tasks, whose methods are served here too). An
unknown tool is a JSON-RPC -32602 error; nothing unexpected reaches a client as more than a generic -32603.

A 2025-era connection that lists the tools is told when they change (a backend went down or came back:
gateway.catalog.live): its ``Connection`` (the SDK's connection-scoped object, reached through the request's
session as ``_connection``: private to mcp 2.3, pinned in pyproject.toml, guarded by tests/system/test_readiness.py)
gets ``notifications/tools/list_changed`` on its standalone stream, and the server says ``tools.listChanged``.
A 2026-era client hears it on a ``subscriptions/listen`` stream it opens (gateway.mcp.listen, which also carries
the tasks extension's ``notifications/tasks``); serving that method is what makes the SDK say ``tools.listChanged``
to them.
"""

from __future__ import annotations

import logging
import secrets
import time
from typing import Any

import mcp_types as types
from mcp.server import InitializationOptions, NotificationOptions, Server, ServerRequestContext
from mcp.server.context import HandlerResult
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.shared.exceptions import MCPError

from gateway.identity.caller import current_caller, current_scopes, is_visible
from gateway.identity.principal import readable
from gateway.mcp import listen, tasks
from gateway.mcp.calls import answer, outcome_label
from gateway.observability import logs, tracing
from gateway.protocol import stateless
from gateway.records import Task
from gateway.runtime import Gateway

log = logging.getLogger(__name__)
calls_log = logging.getLogger("gateway.calls")

VERSION = "0.1.0"


def build_server(gw: Gateway) -> Server[Any]:
    """A low-level MCP server over a running gateway."""

    async def on_list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        if not stateless(ctx.protocol_version):  # a 2025 session can hear list_changed
            gw.listen(ctx.session._connection)  # the connection outlives this request's session object
        catalog = await gw.catalog()
        scopes = current_scopes()
        return types.ListToolsResult(
            tools=[published.tool for name, published in catalog.items() if is_visible(gw.config, name, scopes)]
        )

    async def on_call_tool(ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams) -> HandlerResult:
        request_id = secrets.token_hex(8)  # the JSON-RPC id repeats (every terminal call is 2); this does not
        tool = params.name if params.name in gw.config.tools else "(unknown)"
        with logs.bound(request_id=request_id), tracing.span(f"tool {tool}", **{"gateway.request_id": request_id}):
            return await on_call_tool_logged(ctx, params, request_id)

    async def on_call_tool_logged(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams, request_id: str
    ) -> HandlerResult:
        started = time.perf_counter()
        known = params.name in gw.config.tools
        outcome = "internal_error"
        try:
            result = await answer(gw, ctx, params)
            outcome = outcome_label(result)
            return await tasks.created(gw, result) if isinstance(result, Task) else result
        except MCPError as err:
            outcome = "unknown_tool" if err.code == types.INVALID_PARAMS else "protocol_error"
            raise
        finally:
            seconds = time.perf_counter() - started
            tool = params.name if known else "(unknown)"  # never a label per unknown name a caller made up
            gw.metrics.call_answered(tool, outcome, seconds)
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
        get_tool_input_schema=gw.cached_input_schema,
    )
    # Registered by method rather than as on_call_tool: a call may also answer a task (a CreateTaskResult).
    server.add_request_handler("tools/call", types.CallToolRequestParams, on_call_tool)
    tasks.register(server, gw)
    listen.register(server, gw)
    security = RequestStateSecurity(keys=gw.keys, ttl=_longest_prompt(gw))
    server.middleware.append(RequestStateBoundary(security, default_audience=gw.config.gateway.name))
    return server


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
