"""The ASGI app ``serve`` runs: an MCP request goes to /mcp's endpoint without the Starlette app's router.

Starlette passes every request through its error middleware, the edge checks, the body cap, its exception
middleware and its router before a route runs. For /mcp only three of those do anything: the edge checks
(gateway/http/edge.py), and the error middleware's plain 500 for an exception before the answer started; the body
cap leaves /mcp to the SDK's own cap, no exception handler catches what /mcp raises (the SDK answers its errors,
and gateway/http/answer_modes.py its store's), and the router only finds the route. So ``FrontDoor`` hands an HTTP
request whose path is exactly ``/mcp`` to those two around the endpoint, and everything else (every other path,
``/mcp/``, a lifespan or websocket scope, a request under a ``root_path``) to the app, whose ``/mcp`` route is the
same endpoint behind the same checks. About 0.04 ms of CPU per call (bench/RESULTS.md).
"""

from __future__ import annotations

from typing import Any

from starlette.applications import Starlette
from starlette.middleware.errors import ServerErrorMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send

from gateway.http.edge import EdgeGuard

MCP_PATH = "/mcp"


class FrontDoor:
    """ASGI app: ``/mcp`` through ``edge`` (the app's own EdgeGuard settings) to ``endpoint``, the rest to ``app``."""

    def __init__(self, app: Starlette, endpoint: ASGIApp, edge: dict[str, Any]) -> None:
        self.app = app
        self.endpoint = endpoint
        self.mcp = ServerErrorMiddleware(EdgeGuard(endpoint, **edge))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == MCP_PATH and not scope.get("root_path"):
            await self.mcp(scope, receive, send)
            return
        await self.app(scope, receive, send)
