"""Who is calling: the verified token's client (and subject) over HTTP, a configured name otherwise."""

from __future__ import annotations

from mcp.server.auth.middleware.auth_context import get_access_token


def current_caller(default: str) -> str:
    """The caller id that plans and idempotency keys are bound to."""
    token = get_access_token()
    if token is None:
        return default
    subject = getattr(token, "subject", None)
    return f"{token.client_id}/{subject}" if subject else token.client_id
