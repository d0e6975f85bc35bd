"""The PostgreSQL store's URL: which parameters are ours and which libpq's, where the password comes from, and
the defaults that make a database that stopped answering refuse a call within seconds.

    postgresql://[user@]host[:port]/dbname?PARAMS           (postgres:// too; ?host=/run/postgresql for a socket)

Ours: ``schema`` (the PostgreSQL schema holding the gateway's tables, default ``gateway``: several gateways may
share a database under different schemas), ``lock_lease`` (seconds, default 60: gateway/stores/leases.py),
``timeout`` (seconds one store operation may take in all, waiting for a pooled connection included, default 5;
also the server's ``statement_timeout``) and ``pool_max`` (connections per process, default 10).

Everything else is libpq's, spelled as libpq spells it and passed to it unchanged: ``sslmode``, ``sslrootcert``,
``sslcert``, ``sslkey``, ``sslcrl``, ``passfile``, ``service``, ``application_name``, ``target_session_attrs``,
``keepalives_idle``, ... (an unknown one is refused, naming it). ``connect_timeout`` defaults to 3 s here (libpq
waits forever), and TCP keepalives to probing an idle connection after 10 s, so a server that vanished is noticed.
libpq's environment applies as usual (``PGHOST``, ``PGSSLMODE``, ``PGPASSWORD``, ``PGPASSFILE``, ...).

Never a password in the config file: neither ``user:password@`` nor ``password=`` is accepted in ``gateway.store``
(``credentials_refusal``, checked when the config is loaded). The password comes from ``GATEWAY_STORE_PASSWORD``
or the file ``GATEWAY_STORE_PASSWORD_FILE`` names (a mounted secret; either wins over libpq's own), else from where
libpq looks for it: ``PGPASSWORD``, a password file (``~/.pgpass``, ``PGPASSFILE`` or ``passfile=``), a service
file, or no password at all (peer, certificate or GSS authentication).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import quote, unquote, urlencode, urlsplit, urlunsplit

from gateway.config.store_url import credentials_refusal as credentials_refusal
from gateway.config.store_url import store_password
from gateway.stores.leases import DEFAULT_LEASE_SECONDS

DEFAULT_SCHEMA = "gateway"
DEFAULT_TIMEOUT = 5.0
DEFAULT_POOL_MAX = 10
LIBPQ_DEFAULTS = {"connect_timeout": "3", "keepalives_idle": "10", "keepalives_interval": "5", "keepalives_count": "3"}
OURS = {"schema", "lock_lease", "timeout", "pool_max"}
SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


@dataclass(frozen=True)
class PostgresUrl:
    """A parsed store URL: libpq's connection string and our settings."""

    conninfo: str
    schema: str = DEFAULT_SCHEMA
    lease: float = DEFAULT_LEASE_SECONDS
    timeout: float = DEFAULT_TIMEOUT
    pool_max: int = DEFAULT_POOL_MAX


def parse_url(url: str) -> PostgresUrl:
    """Split a store URL into libpq's connection string and ours; ValueError naming gateway.store and the
    parameter."""
    from psycopg import ProgrammingError
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    refusal = credentials_refusal(url)
    if refusal is not None:
        raise ValueError(f"gateway.store: {refusal}")
    parts = urlsplit(url)
    ours: dict[str, str] = {}
    theirs: dict[str, str] = dict(LIBPQ_DEFAULTS)
    for name, value in _query(parts.query):
        (ours if name in OURS else theirs)[name] = value
    try:
        # quote, not quote_plus: libpq reads a '+' in a URL as itself.
        query = urlencode(theirs, quote_via=quote)
        params = conninfo_to_dict(urlunsplit(parts._replace(scheme="postgresql", query=query)))
        password = store_password()
        if password:
            params["password"] = password
        conninfo = make_conninfo("", **params)
    except ProgrammingError as exc:
        raise ValueError(f"gateway.store: {exc} in the PostgreSQL URL") from None
    schema = ours.get("schema", DEFAULT_SCHEMA)
    if not SCHEMA_NAME.match(schema):
        raise ValueError("gateway.store: schema must be a lower-case PostgreSQL name ([a-z_][a-z0-9_]*)")
    return PostgresUrl(
        conninfo=conninfo,
        schema=schema,
        lease=_positive(ours, "lock_lease", DEFAULT_LEASE_SECONDS),
        timeout=_positive(ours, "timeout", DEFAULT_TIMEOUT),
        pool_max=int(_positive(ours, "pool_max", DEFAULT_POOL_MAX)),
    )


def _query(text: str) -> list[tuple[str, str]]:
    """A URL's query as libpq reads it: percent-escapes decoded, a '+' kept as itself (parse_qsl would make it a
    space)."""
    pairs = [part.partition("=") for part in text.split("&") if part]
    return [(unquote(name), unquote(value)) for name, _, value in pairs]


def _positive(ours: dict[str, str], name: str, default: float) -> float:
    if name not in ours:
        return default
    try:
        value = float(ours[name])
    except ValueError:
        raise ValueError(f"gateway.store: {name} must be a number") from None
    if not value > 0:
        raise ValueError(f"gateway.store: {name} must be positive")
    return value
