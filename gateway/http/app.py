"""The HTTP face: streamable HTTP at /mcp (stateful; an SSE stream for the calls that may ask a 2025 client, one JSON
body for everything else: gateway/http/answer_modes.py; a call of a reading tool answered on a lean path, behind the
token checks: gateway/http/lean.py for a 2026-07-28 request, gateway/http/session_reads.py in a 2025 session), health
probes, and, with a verifier configured, OAuth 2.1 resource-server behaviour (RFC 9728 metadata, 401/403 with
``WWW-Authenticate``). Every route, including any added here later, sits behind gateway/http/edge.py's checks: they wrap
the whole app, not a route, and the front door (gateway/http/front.py) puts them in front of the /mcp endpoint it hands
MCP requests to."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from typing import Any
from urllib.parse import urlparse

import anyio
from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
from mcp.server.auth.middleware.bearer_auth import BearerAuthBackend, RequireAuthMiddleware
from mcp.server.auth.routes import build_resource_metadata_url
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
from prometheus_client import CONTENT_TYPE_LATEST
from pydantic import AnyHttpUrl
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, ExceptionHandler

from gateway.config import GatewayConfig
from gateway.errors import StoreUnavailable
from gateway.http.answer_modes import PerRequestSessionManager, SessionLimits, stream_for_tools
from gateway.http.bodies import BodyCap
from gateway.http.edge import EdgeGuard, security_settings, trusted_proxies
from gateway.http.front import FrontDoor
from gateway.http.lean import LeanCalls
from gateway.http.session_reads import SessionReads
from gateway.identity.caller import current_caller, current_scopes, is_visible
from gateway.identity.verifiers import build_verifier
from gateway.mcp.server import build_server
from gateway.runtime import Gateway
from gateway.tools.kinds.kind import Reads
from gateway.tools.kinds.registry import kind_of

READY_WAIT_SECONDS = 3.0
"""How long ``/readyz`` waits for a backend that is being loaded again (its ping is bounded the same way) and for
the store's answer: it answers within about this long, whatever is down."""


def build_app(gw: Gateway, *, insecure_without_auth: bool = False) -> FrontDoor:
    """The ASGI app for a started gateway (MCP requests go to /mcp's endpoint past the app's router:
    gateway/http/front.py). ``insecure_without_auth`` (``serve --insecure-listen-without-auth``) lets an
    unauthenticated gateway answer requests a proxy relayed."""
    config = gw.config
    verifier = build_verifier(config.auth, config.approvals.display_claim)
    caller = partial(current_caller, config.gateway.stdio_caller)
    server = build_server(gw)
    lean = answered_lean(config)
    sessions = PerRequestSessionManager(
        needs_stream=stream_for_tools(config.write_tools(), lambda tool: is_visible(config, tool, current_scopes())),
        limits=SessionLimits(
            per_caller=config.http.max_sessions_per_caller,
            unused_idle_seconds=config.http.unused_session_idle_seconds,
            caller=caller,
            take_token=gw.limiter.opening,
        ),
        reads=SessionReads(server, lean=lean),
        app=server,
        json_response=False,  # 2026-07-28 requests: JSON unless the handler streams (the SDK defers the choice)
        stateless=False,
        max_request_body_size=config.limits.max_body_bytes,
        max_sessions=config.http.max_sessions,
        session_idle_timeout=config.http.session_idle_seconds,
        security_settings=security_settings(config),
    )
    endpoint: ASGIApp = LeanCalls(
        StreamableHTTPASGIApp(sessions),
        server,
        lean=lean,
        security=security_settings(config),
        max_body=config.limits.max_body_bytes,
    )
    if verifier is not None:
        # The SDK's own wiring, around /mcp only: health probes and metrics never verify a token. The challenge
        # points at the metadata, which names the authorization servers (if any are configured).
        assert config.auth.resource_url is not None
        metadata_url = build_resource_metadata_url(AnyHttpUrl(config.auth.resource_url))
        endpoint = RequireAuthMiddleware(endpoint, config.auth.required_scopes, metadata_url)
        endpoint = AuthenticationMiddleware(AuthContextMiddleware(endpoint), backend=BearerAuthBackend(verifier))

    async def healthz(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    async def readyz(request: Request) -> JSONResponse:
        answers: dict[str, Any] = {}

        async def probe_store() -> None:
            answers["store"] = await _store_answers(gw)

        async with anyio.create_task_group() as group:  # both bounded by READY_WAIT_SECONDS, side by side
            group.start_soon(probe_store)
            backends = await _backends_answer(gw)
        store = answers["store"]
        up = [name for name, answers in backends.items() if answers]
        overall = "up" if len(up) == len(backends) else "degraded" if up else "down"
        body = {
            "backend": overall,
            "backends": {name: "up" if answers else "down" for name, answers in backends.items()},
            "store": "up" if store else "down",
        }
        # A backend is up when it answers a ping and its tools could be built (gateway.catalog.live). Ready while
        # any backend is: a backend that is down fails only its own tools.
        return JSONResponse(body, status_code=200 if up and store else 503)

    async def metrics(request: Request) -> Response:
        if config.approvals.configured:
            await _count_pending_approvals(gw)
        return Response(gw.metrics.exposition(), media_type=CONTENT_TYPE_LATEST)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with sessions.run():
            yield

    # /mcp first: the router tries routes in order, and every MCP request would otherwise be matched against each
    # page route first (no other path overlaps it).
    routes: list[BaseRoute] = [Route("/mcp", endpoint), Route("/healthz", healthz), Route("/readyz", readyz)]
    routes.append(Route("/metrics", metrics))
    handlers: dict[Any, ExceptionHandler] = {}
    if config.approvals.configured:
        from gateway.http.page.routes import ApprovalPage  # Jinja2 and the page only where approvals are on

        page = ApprovalPage(gw)
        routes += page.routes()
        handlers[StoreUnavailable] = page.store_unavailable  # only the page's routes let it out
    if verifier is not None:
        routes += _metadata_routes(config)
    edge: dict[str, Any] = {
        "settings": security_settings(config),
        "refuse_relayed": verifier is None and not insecure_without_auth,
        "proxies": trusted_proxies(config),
    }
    app = Starlette(
        routes=routes,
        middleware=[Middleware(EdgeGuard, **edge), Middleware(BodyCap)],
        lifespan=lifespan,
        exception_handlers=handlers,
    )
    return FrontDoor(app, endpoint, edge)


def build_page_app(gw: Gateway) -> Starlette:
    """The approval page alone (and its health check), for ``serve --stdio``: the page its url-mode writes link
    to, on a loopback port, with no MCP endpoint beside it (MCP is on stdio)."""
    from gateway.http.page.routes import ApprovalPage

    page = ApprovalPage(gw)

    async def healthz(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    edge = Middleware(
        EdgeGuard, settings=security_settings(gw.config), refuse_relayed=True, proxies=trusted_proxies(gw.config)
    )
    return Starlette(
        routes=[Route("/healthz", healthz), *page.routes()],
        middleware=[edge, Middleware(BodyCap)],
        exception_handlers={StoreUnavailable: page.store_unavailable},
    )


def answered_lean(config: GatewayConfig) -> Callable[[str], bool]:
    """Whether a lean path (gateway.http.lean for a 2026-07-28 request, gateway.http.session_reads in a 2025
    session) answers a call of the named tool for this request's caller: a tool whose kind only reads, and any name
    the caller's answer is "unknown tool" for (a name no tool has, a tool hidden from the caller). A hidden tool
    must answer exactly like an unknown one, in its timing too, so both take one path."""
    writing = frozenset(name for name, tool in config.tools.items() if not isinstance(kind_of(tool), Reads))

    def lean(name: str) -> bool:
        return name not in writing or not is_visible(config, name, current_scopes())

    return lean


async def _backends_answer(gw: Gateway) -> dict[str, bool]:
    answers: dict[str, bool] = {}

    async def probe(name: str) -> None:
        answers[name] = await gw.live.ready(name, READY_WAIT_SECONDS)

    async with anyio.create_task_group() as group:
        for name in gw.backends:
            group.start_soon(probe, name)
    return {name: answers[name] for name in gw.backends}


async def _count_pending_approvals(gw: Gateway) -> None:
    """The pending-approvals gauge, read from the store (so every replica reports the shared number)."""
    from gateway.approvals.lifecycle import State, state

    now = gw.clock()
    try:
        approvals = await gw.store.open_approvals(now)
    except StoreUnavailable:
        return
    gw.metrics.approvals_pending.set(sum(1 for approval in approvals if state(approval, now) is State.PENDING))


async def _store_answers(gw: Gateway) -> bool:
    """Whether the store answers a read within READY_WAIT_SECONDS (a stalled one is down, not a hung probe)."""
    with anyio.move_on_after(READY_WAIT_SECONDS):
        try:
            await gw.store.get_record("(readiness probe)", "(readiness probe)")
        except Exception:
            return False
        return True
    return False


def authorization_servers(config: GatewayConfig) -> list[str]:
    """The authorization servers that issue this gateway's tokens: as configured, else the configured issuer.
    None for static tokens: nobody issues them, and the gateway must not name itself, or OAuth-discovering hosts
    would try to log in there."""
    auth = config.auth
    if auth.authorization_servers:
        return auth.authorization_servers
    if auth.verifier == "jwt" and auth.jwt is not None:
        return [auth.jwt.issuer]
    if auth.verifier == "introspection" and auth.introspection is not None and auth.introspection.issuer:
        return [auth.introspection.issuer]
    return []


def _metadata_routes(config: GatewayConfig) -> list[Route]:
    """RFC 9728 metadata with every scope a tool can ask for, and URLs exactly as configured (issuer
    identifiers compare as strings, so no trailing slash may be added). ``authorization_servers`` is left out
    when none issues the tokens (RFC 9728 makes it optional)."""
    resource = config.auth.resource_url
    assert resource is not None
    scopes = {scope for name in config.tools for scope in config.scopes_of(name)}
    body: dict[str, object] = {"resource": resource}
    if servers := authorization_servers(config):
        body["authorization_servers"] = servers
    body |= {
        "scopes_supported": sorted({*scopes, *config.auth.required_scopes}),
        "bearer_methods_supported": ["header"],
        "resource_name": config.gateway.name,
    }

    async def metadata(request: Request) -> JSONResponse:
        return JSONResponse(body)

    path = urlparse(resource).path.rstrip("/")
    return [Route(f"/.well-known/oauth-protected-resource{path}", metadata, methods=["GET"])]
