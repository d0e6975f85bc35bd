"""What every HTTP request passes before any route sees it, and the settings an unauthenticated gateway refuses.

``EdgeGuard`` wraps the whole Starlette app (gateway/http/app.py installs it as the app's middleware), so every
route gets it: the probes, the metrics, the RFC 9728 metadata, /mcp, and any route added later, without asking;
the front door (gateway/http/front.py), which hands MCP requests to /mcp's endpoint past the app, puts one in
front of it too.
First, a request from one of ``[http] trusted_proxies`` is taken as the client it names (address, scheme, host:
gateway/http/proxies.py); from any other peer, forwarded headers change nothing. Then, without a verifier, a
request relayed by a proxy (any forwarded header, whoever sent it) is refused: a reverse proxy on the same
machine would otherwise make a loopback-only gateway answer remote callers. Last, ``Host`` and ``Origin`` are
checked against ``[http]`` exactly as the SDK checks them on /mcp (a DNS-rebinding page gets 421 or 403 before a
probe connects to the backend); behind a trusted proxy, the host checked is the one it forwards.

Without a verifier the gateway must stay reachable only from its own machine, so ``exposure`` lists every
setting that would let the rest of the network (or a web page) in; ``serve`` refuses to start on any of them
unless given ``--insecure-listen-without-auth``.
"""

from __future__ import annotations

from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from gateway.config import GatewayConfig
from gateway.config.loopback import is_loopback, is_loopback_host_pattern, is_loopback_origin_pattern
from gateway.errors import Code
from gateway.http.proxies import TrustedProxies

RELAY_HEADERS = ("forwarded", "x-forwarded-", "x-real-ip")
"""Headers a proxy adds when it relays a request (RFC 7239 and the de-facto ``X-Forwarded-*`` family)."""


def security_settings(config: GatewayConfig) -> TransportSecuritySettings:
    """The ``[http]`` Host/Origin checks in the SDK's terms."""
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=config.http.dns_rebinding_protection,
        allowed_hosts=config.http.allowed_hosts,
        allowed_origins=config.http.allowed_origins,
    )


def exposure(config: GatewayConfig, host: str) -> list[str]:
    """Why a gateway without a verifier, listening on ``host``, could be reached from beyond this machine:
    one sentence per setting, naming it. Empty with a verifier, or when nothing lets anyone else in."""
    if config.auth.verifier != "none":
        return []
    http = config.http
    found = []
    if not is_loopback(host):
        found.append(f"--host {host} is not a loopback address")
    if http.trusted_proxies:
        found.append("http.trusted_proxies names proxies, which relay requests from beyond this machine")
    if not http.dns_rebinding_protection:
        found.append("http.dns_rebinding_protection = false lets any web page's requests in (DNS rebinding)")
    found += [
        f"http.allowed_hosts admits {pattern!r}, which is not a loopback name"
        for pattern in http.allowed_hosts
        if not is_loopback_host_pattern(pattern)
    ]
    found += [
        f"http.allowed_origins admits {pattern!r}, which is not a loopback page"
        for pattern in http.allowed_origins
        if not is_loopback_origin_pattern(pattern)
    ]
    return found


def relayed(headers: Headers) -> bool:
    """Whether a proxy relayed the request (it says so in a header)."""
    return any(name.startswith(RELAY_HEADERS) for name in headers)


def trusted_proxies(config: GatewayConfig) -> TrustedProxies:
    """The ``[http]`` proxies whose forwarded headers are believed."""
    return TrustedProxies(config.http.trusted_proxies, config.http.forwarded_headers)


def as_forwarded(scope: Scope, proxies: TrustedProxies) -> Scope:
    """The request as the client made it, when a trusted proxy relayed it (its address, scheme and host); the
    scope unchanged otherwise."""
    client = scope.get("client")
    said = proxies.forwarded(client[0] if client else None, scope.get("headers", []))
    if said is None:
        return scope
    changed = dict(scope)
    if said.client is not None:
        changed["client"] = (said.client, 0)
    if said.scheme is not None:
        changed["scheme"] = said.scheme if scope["type"] == "http" else said.scheme.replace("http", "ws")
    if said.host is not None:
        headers = [(name, value) for name, value in scope["headers"] if name.lower() != b"host"]
        changed["headers"] = [(b"host", said.host.encode("latin-1")), *headers]
    return changed


class EdgeGuard:
    """ASGI middleware: a trusted proxy's request is taken as its client's, a relayed one is refused when
    ``refuse_relayed`` (no verifier), and every request's Host and Origin are checked. Lifespan and other scopes
    pass through."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        settings: TransportSecuritySettings,
        refuse_relayed: bool,
        proxies: TrustedProxies | None = None,
    ) -> None:
        self.app = app
        self._checks = TransportSecurityMiddleware(settings)
        self._refuse_relayed = refuse_relayed
        self._proxies = proxies or TrustedProxies([])

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        scope = as_forwarded(scope, self._proxies)
        if self._refuse_relayed and relayed(Headers(scope=scope)):
            body = {
                "code": Code.PROXIED_REQUEST_REFUSED.value,
                "message": "This gateway has no authentication configured and answers only its own machine, "
                "not requests relayed by a proxy.",
            }
            await self._refuse(JSONResponse(body, status_code=403), scope, receive, send)
            return
        # Content-Type is /mcp's business (the SDK checks it there); Host and Origin are every route's.
        refusal = await self._checks.validate_request(Request(scope), is_post=False)
        if refusal is not None:
            await self._refuse(refusal, scope, receive, send)
            return
        await self.app(scope, receive, send)

    @staticmethod
    async def _refuse(response: Response, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})  # policy violation; no websocket route exists
            return
        await response(scope, receive, send)
