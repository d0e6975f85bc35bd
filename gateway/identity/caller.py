"""Who is calling and what they may do: the verified token over HTTP, the configured caller otherwise.

Without a token (stdio, or HTTP with no verifier configured, which only listens on loopback) the caller is the
configured local name and holds every scope. With a token it is the token's (issuer, client, subject), encoded by
gateway.identity.principal; this is the one place that builds it.

A tool the caller may not use is hidden from ``tools/list`` and answers exactly like an unknown tool, unless the
operator keeps it visible; then it answers ``forbidden``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import mcp_types as types
from mcp.server.auth.middleware.auth_context import auth_context_var, get_access_token
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken, principal_components
from mcp.shared.exceptions import MCPError

from gateway.config import GatewayConfig
from gateway.errors import AVAILABLE, Code, ToolError, authorization_denial, scope_hint
from gateway.identity.person import DISPLAY, PERSON_ISSUER, STATIC_ISSUER, person_id
from gateway.identity.principal import Principal, encode


def current_principal() -> Principal | None:
    """The verified token's (issuer, client, subject), or None without a token."""
    token = get_access_token()
    if token is None:
        return None
    # The SDK's own principal (session ownership, requestState binding) is made of the same three parts.
    client, issuer, subject = principal_components(token)
    return Principal(issuer=issuer, client=client, subject=subject)


def current_caller(default: str) -> str:
    """The caller id that plans, idempotency keys, rate-limit buckets, sessions and the audit are bound to."""
    principal = current_principal()
    return default if principal is None else encode(principal)


def current_person() -> str | None:
    """The person behind the caller's token, as ``person_id(issuer, subject)``, or None without a token.

    Four eyes compares it with an approver's own login: the same issuer and subject is the same person."""
    token = get_access_token()
    if token is None:
        return None
    client, issuer, subject = principal_components(token)
    stated = (token.claims or {}).get(PERSON_ISSUER)  # a static token's holder, as the config names them
    return person_id(str(stated or issuer or STATIC_ISSUER), subject or client)


def current_display() -> str | None:
    """What the approval page shows beside the caller's (issuer, subject): their token's display claim or verified
    email, as the verifier kept it; None without one."""
    token = get_access_token()
    shown = (token.claims or {}).get(DISPLAY) if token is not None else None
    return shown if isinstance(shown, str) else None


def caller_facts(config: GatewayConfig, default: str) -> dict[str, Any]:
    """Who is calling, as approval rules read it: id, client, subject, issuer and scopes."""
    principal = current_principal()
    if principal is None:
        everything = sorted({scope for name in config.tools for scope in config.scopes_of(name)})
        return {"id": default, "client": default, "subject": default, "issuer": STATIC_ISSUER, "scopes": everything}
    return {
        "id": encode(principal),
        "client": principal.client,
        "subject": principal.subject or principal.client,
        "issuer": principal.issuer or STATIC_ISSUER,
        "scopes": sorted(current_scopes() or ()),
    }


def current_identity() -> dict[str, Any]:
    """Who the current request acts for, to act for them again later (a task the gateway resumes): the token's
    client, issuer, subject and scopes, never the token itself; empty without a token."""
    token = get_access_token()
    if token is None:
        return {}
    client, issuer, subject = principal_components(token)
    return {"client": client, "issuer": issuer, "subject": subject, "scopes": sorted(token.scopes)}


@contextmanager
def acting_as(identity: dict[str, Any]) -> Iterator[None]:
    """Run the block as the request ``current_identity`` was taken from: the same caller, person and scopes (the
    gateway's own copy of what the verified token said, without the token)."""
    if not identity:
        yield
        return
    claims = {"iss": identity["issuer"]} if identity.get("issuer") is not None else None
    token = AccessToken(
        token="",
        client_id=identity["client"],
        scopes=list(identity["scopes"]),
        subject=identity["subject"],
        claims=claims,
    )
    reset = auth_context_var.set(AuthenticatedUser(token))
    try:
        yield
    finally:
        auth_context_var.reset(reset)


def current_scopes() -> set[str] | None:
    """The caller's scopes, or None when no token is in play (every scope)."""
    token = get_access_token()
    return None if token is None else set(token.scopes)


def missing_scopes(config: GatewayConfig, tool: str, scopes: set[str] | None) -> list[str]:
    """The scopes the caller lacks for a tool."""
    if scopes is None:
        return []
    return [scope for scope in config.scopes_of(tool) if scope not in scopes]


def is_visible(config: GatewayConfig, tool: str, scopes: set[str] | None) -> bool:
    """Whether a tool appears to this caller at all."""
    return not missing_scopes(config, tool, scopes) or not config.tools[tool].hidden_when_unauthorized


def unknown_tool(name: str) -> MCPError:
    """The JSON-RPC error for a tool that does not exist, or that this caller may not know exists."""
    return MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {name[:64]}")


def authorize(config: GatewayConfig, tool: str, scopes: set[str] | None) -> None:
    """Let the call through, answer as if the tool did not exist, or refuse with forbidden."""
    missing = missing_scopes(config, tool, scopes)
    if not missing:
        return
    if config.tools[tool].hidden_when_unauthorized:
        raise unknown_tool(tool)
    raise ToolError(
        Code.FORBIDDEN,
        f"This caller lacks the scope {missing[0]!r} that {tool} needs. Nothing was changed.",
        details={"missingScopes": missing},
        authorization=authorization_denial(
            AVAILABLE, [scope_hint(tool, missing, config.auth.resource_url)], credential="replacement"
        ),
    )
