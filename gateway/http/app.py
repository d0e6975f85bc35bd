"""The HTTP face: streamable HTTP at /mcp (stateful; an SSE stream for the calls that may ask a 2025 client, one JSON
body for everything else: gateway/http/sessions.py), health probes, and,
with a verifier configured, OAuth 2.1 resource-server behaviour (RFC 9728 metadata, 401/403 with
``WWW-Authenticate``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from urllib.parse import urlparse

from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
from mcp.server.auth.middleware.bearer_auth import BearerAuthBackend, RequireAuthMiddleware
from mcp.server.auth.routes import build_resource_metadata_url
from mcp.server.auth.settings import AuthSettings
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
from mcp.server.transport_security import TransportSecuritySettings
from prometheus_client import CONTENT_TYPE_LATEST
from pydantic import AnyHttpUrl
from starlette.applications import Starlette
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp

from gateway.config import GatewayConfig
from gateway.errors import StoreUnavailable
from gateway.http.auth import build_verifier
from gateway.http.sessions import PerRequestSessionManager, stream_for_tools
from gateway.runtime import Gateway
from gateway.server import build_server


def build_app(gw: Gateway) -> Starlette:
    """The ASGI app for a started gateway."""
    config = gw.config
    verifier = build_verifier(config.auth)
    auth = _auth_settings(config) if verifier is not None else None
    sessions = PerRequestSessionManager(
        needs_stream=stream_for_tools(config.write_tools()),
        app=build_server(gw),
        json_response=False,  # 2026-07-28 requests: JSON unless the handler streams (the SDK defers the choice)
        stateless=False,
        max_request_body_size=config.limits.max_body_bytes,
        security_settings=TransportSecuritySettings(
            enable_dns_rebinding_protection=config.http.dns_rebinding_protection,
            allowed_hosts=config.http.allowed_hosts,
            allowed_origins=config.http.allowed_origins,
        ),
    )
    endpoint: ASGIApp = StreamableHTTPASGIApp(sessions)
    if verifier is not None and auth is not None:
        # The SDK's own wiring, around /mcp only: health probes and metrics never verify a token.
        assert auth.resource_server_url is not None
        metadata_url = build_resource_metadata_url(auth.resource_server_url)
        endpoint = RequireAuthMiddleware(endpoint, auth.required_scopes or [], metadata_url)
        endpoint = AuthenticationMiddleware(AuthContextMiddleware(endpoint), backend=BearerAuthBackend(verifier))

    async def healthz(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    async def readyz(request: Request) -> JSONResponse:
        backend = await gw.backend.probe()
        store = await _store_answers(gw)
        body = {"backend": "up" if backend else "down", "store": "up" if store else "down"}
        return JSONResponse(body, status_code=200 if backend and store else 503)

    async def metrics(request: Request) -> Response:
        if config.approvals.configured:
            await _count_pending_approvals(gw)
        return Response(gw.metrics.exposition(), media_type=CONTENT_TYPE_LATEST)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with sessions.run():
            yield

    routes: list[BaseRoute] = [Route("/healthz", healthz), Route("/readyz", readyz), Route("/metrics", metrics)]
    if config.approvals.configured:
        from gateway.approvals.page import approval_routes  # Jinja2 and the page only where approvals are on

        routes += approval_routes(gw)
    if auth is not None:
        routes += _metadata_routes(config, auth)
    routes.append(Route("/mcp", endpoint))
    return Starlette(routes=routes, lifespan=lifespan)


async def _count_pending_approvals(gw: Gateway) -> None:
    """The pending-approvals gauge, read from the store (so every replica reports the shared number)."""
    from gateway.approvals.rules import State, state

    now = gw.clock()
    try:
        approvals = await gw.store.open_approvals(now)
    except StoreUnavailable:
        return
    gw.metrics.approvals_pending.set(sum(1 for approval in approvals if state(approval, now) is State.PENDING))


async def _store_answers(gw: Gateway) -> bool:
    try:
        await gw.store.get_record("(readiness probe)", "(readiness probe)")
    except Exception:
        return False
    return True


def _auth_settings(config: GatewayConfig) -> AuthSettings:
    assert config.auth.resource_url is not None
    return AuthSettings(
        issuer_url=AnyHttpUrl(_authorization_servers(config)[0]),
        resource_server_url=AnyHttpUrl(config.auth.resource_url),
        required_scopes=config.auth.required_scopes or None,
        validate_token_resource=False,  # each verifier checks the audience itself
    )


def _authorization_servers(config: GatewayConfig) -> list[str]:
    if config.auth.authorization_servers:
        return config.auth.authorization_servers
    if config.auth.jwt is not None:
        return [config.auth.jwt.issuer]
    assert config.auth.resource_url is not None
    return [config.auth.resource_url]


def _metadata_routes(config: GatewayConfig, auth: AuthSettings) -> list[Route]:
    """RFC 9728 metadata with every scope a tool can ask for, and URLs exactly as configured (issuer
    identifiers compare as strings, so no trailing slash may be added)."""
    resource = config.auth.resource_url
    assert resource is not None
    scopes = {scope for name in config.tools for scope in config.scopes_of(name)}
    body = {
        "resource": resource,
        "authorization_servers": _authorization_servers(config),
        "scopes_supported": sorted({*scopes, *config.auth.required_scopes}),
        "bearer_methods_supported": ["header"],
        "resource_name": config.gateway.name,
    }

    async def metadata(request: Request) -> JSONResponse:
        return JSONResponse(body)

    path = urlparse(resource).path.rstrip("/")
    return [Route(f"/.well-known/oauth-protected-resource{path}", metadata, methods=["GET"])]
