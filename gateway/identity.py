"""Who is calling and what they may do: the verified token over HTTP, the configured caller otherwise.

Without a token (stdio, or HTTP with no verifier configured, which only listens on loopback) the caller is the
configured local name and holds every scope. With a token it is the token's (issuer, client, subject), encoded by
gateway.principal; this is the one place that builds it.

A tool the caller may not use is hidden from ``tools/list`` and answers exactly like an unknown tool, unless the
operator keeps it visible; then it answers ``forbidden``.
"""

from __future__ import annotations

import mcp_types as types
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import principal_components
from mcp.shared.exceptions import MCPError

from gateway.config import GatewayConfig
from gateway.errors import Code, ToolError
from gateway.principal import Principal, encode


def current_caller(default: str) -> str:
    """The caller id that plans, idempotency keys, rate-limit buckets, sessions and the audit are bound to."""
    token = get_access_token()
    if token is None:
        return default
    # The SDK's own principal (session ownership, requestState binding) is made of the same three parts.
    client, issuer, subject = principal_components(token)
    return encode(Principal(issuer=issuer, client=client, subject=subject))


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
    )
