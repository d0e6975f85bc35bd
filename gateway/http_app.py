"""The HTTP face: streamable HTTP at /mcp (stateful, SSE, so 2025 clients can be asked), plus health probes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route

from gateway.runtime import Gateway
from gateway.server import build_server


def build_app(gw: Gateway, *, host: str = "127.0.0.1") -> Starlette:
    """The ASGI app for a started gateway."""
    server = build_server(gw)
    mcp_app = server.streamable_http_app(
        streamable_http_path="/mcp",
        stateless_http=False,
        json_response=False,
        max_request_body_size=gw.config.limits.max_body_bytes,
        host=host,
    )

    async def healthz(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    async def readyz(request: Request) -> JSONResponse:
        ready = await gw.backend.probe()
        return JSONResponse({"backend": "up" if ready else "down"}, status_code=200 if ready else 503)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        # Starlette does not run a mounted app's lifespan, so the session manager is started here.
        async with server.session_manager.run():
            yield

    return Starlette(
        routes=[Route("/healthz", healthz), Route("/readyz", readyz), Mount("/", app=mcp_app)],
        lifespan=lifespan,
    )
