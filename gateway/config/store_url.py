"""What the config itself checks of a store URL (``gateway.store``), before any store is opened.

A PostgreSQL URL may not carry a password in the file: the password comes from libpq's own places (the
environment, a password file). The stores parse the rest of their URLs themselves (gateway/stores/postgres_url.py,
redis_url.py).
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit

POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def is_postgres(url: str) -> bool:
    """Whether a store URL names the PostgreSQL store."""
    return url.startswith(POSTGRES_SCHEMES)


def credentials_refusal(url: str) -> str | None:
    """Why a PostgreSQL URL may not stand in a config file (it carries a password), or None."""
    parts = urlsplit(url)
    named = [name for name, _ in parse_qsl(parts.query, keep_blank_values=True) if name == "password"]
    if parts.password is None and not named:
        return None
    return (
        "a PostgreSQL URL in the config file must not carry a password; set PGPASSWORD in the gateway's "
        "environment or use a password file (~/.pgpass, PGPASSFILE, or passfile=PATH in the URL)"
    )
