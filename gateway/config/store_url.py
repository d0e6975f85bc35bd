"""What the config itself checks of a store URL (``gateway.store``), before any store is opened, and the store's
password from the environment.

A PostgreSQL URL may not carry a password in the file: the password comes from ``GATEWAY_STORE_PASSWORD`` (or the
file ``GATEWAY_STORE_PASSWORD_FILE`` names), else from libpq's own places (the environment, a password file). A
Redis URL without a password takes the same variable. The stores parse the rest of their URLs themselves
(gateway/stores/postgres/url.py, redis/url.py).
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit

from gateway.config.environ import SecretError, secret

POSTGRES_SCHEMES = ("postgresql://", "postgres://")
PASSWORD_ENV = "GATEWAY_STORE_PASSWORD"
"""The store's password (PostgreSQL, or Redis where the URL carries none), or its ``_FILE``: a mounted secret."""


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
        "a PostgreSQL URL in the config file must not carry a password; set GATEWAY_STORE_PASSWORD (or "
        "GATEWAY_STORE_PASSWORD_FILE, a file holding it) or PGPASSWORD in the gateway's environment, or use a "
        "password file (~/.pgpass, PGPASSFILE, or passfile=PATH in the URL)"
    )


def store_password() -> str | None:
    """The store's password from the environment or its file, or None; ValueError naming gateway.store and the
    variable when it cannot be read."""
    try:
        return secret(PASSWORD_ENV) or None
    except SecretError as exc:
        raise ValueError(f"gateway.store: {exc}") from None
