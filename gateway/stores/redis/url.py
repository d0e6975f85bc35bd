"""The Redis store's URL: which parameters are ours and which redis-py's, and the defaults that make a stalled
Redis fail fast (the lock lease's check against the write timeouts is gateway/stores/leases.py's, for every
shared store). A URL without a password takes ``GATEWAY_STORE_PASSWORD`` (or the file ``GATEWAY_STORE_PASSWORD_FILE``
names), so the password can stay out of the config file.

    redis://[[user]:password@]host:6379/0?PARAMS                      one primary (rediss:// TLS, unix:// socket)
    redis+sentinel://[[user]:password@]h1:26379,h2:26379,h3:26379/SERVICE[/DB]?PARAMS

Ours: ``lock_lease`` (seconds, default 60), ``prefix`` (``gateway:``), ``retries`` (attempts after the first on a
connection error or timeout, default 2), ``min_replicas`` (replicas that must acknowledge a claim before the
backend is called; default 1 with Sentinel, 0 without) and ``replica_wait`` (seconds to wait for them, 0.5).
redis-py's own (``socket_timeout``, ``socket_connect_timeout``, ``health_check_interval``, ...) pass through;
``socket_timeout`` and ``socket_connect_timeout`` default to 1 s here (redis-py waits forever), so a Redis that
stopped answering with its connections open refuses a call within a few seconds instead of hanging. With
Sentinel, the password is the data nodes' (the sentinels are asked without one), and ``SERVICE`` is the name the
sentinels monitor.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit, urlunsplit

from gateway.config.store_url import store_password
from gateway.stores.leases import DEFAULT_LEASE_SECONDS, LEASE_MARGIN_SECONDS, lease_refusal

DEFAULT_PREFIX = "gateway:"
DEFAULT_RETRIES = 2
DEFAULT_REPLICA_WAIT = 0.5
DEFAULT_SOCKET_TIMEOUT = "1"
SENTINEL_SCHEME = "redis+sentinel"
__all__ = ["DEFAULT_LEASE_SECONDS", "LEASE_MARGIN_SECONDS", "RedisUrl", "lease_refusal", "parse_url"]
OURS = {"lock_lease", "prefix", "retries", "min_replicas", "replica_wait"}


@dataclass(frozen=True)
class RedisUrl:
    """A parsed store URL."""

    lease: float = DEFAULT_LEASE_SECONDS
    prefix: str = DEFAULT_PREFIX
    retries: int = DEFAULT_RETRIES
    min_replicas: int = 0
    replica_wait: float = DEFAULT_REPLICA_WAIT
    url: str = ""
    """redis-py's URL for one primary ("" with Sentinel)."""
    sentinels: list[tuple[str, int]] = field(default_factory=list)
    service: str = ""
    db: int = 0
    username: str | None = None
    password: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    """redis-py's connection options from the query (Sentinel), converted to their types."""


def parse_url(url: str) -> RedisUrl:
    """Split a store URL into ours and redis-py's; ValueError naming gateway.store and the parameter."""
    from redis.asyncio.connection import URL_QUERY_ARGUMENT_PARSERS

    parts = urlsplit(url)
    ours: dict[str, str] = {}
    theirs: dict[str, str] = {
        "socket_timeout": DEFAULT_SOCKET_TIMEOUT,
        "socket_connect_timeout": DEFAULT_SOCKET_TIMEOUT,
    }
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if name in OURS:
            ours[name] = value
        elif name in URL_QUERY_ARGUMENT_PARSERS:
            theirs[name] = value
        else:
            raise ValueError(f"gateway.store: unknown parameter {name!r} in the Redis URL")
    sentinel = parts.scheme == SENTINEL_SCHEME
    password = store_password()
    if password and parts.password is None:  # the URL's own wins: it says so where it stands
        user, _, hosts = parts.netloc.rpartition("@")
        parts = parts._replace(netloc=f"{user.partition(':')[0]}:{quote(password, safe='')}@{hosts}")
    parsed = RedisUrl(
        lease=_number(ours, "lock_lease", DEFAULT_LEASE_SECONDS, float, positive=True),
        prefix=ours.get("prefix", DEFAULT_PREFIX),
        retries=_number(ours, "retries", DEFAULT_RETRIES, int),
        min_replicas=_number(ours, "min_replicas", 1 if sentinel else 0, int),
        replica_wait=_number(ours, "replica_wait", DEFAULT_REPLICA_WAIT, float, positive=True),
    )
    if not sentinel:
        query = urlencode(list(theirs.items()))
        return replace(parsed, url=urlunsplit(parts._replace(query=query)))
    options: dict[str, Any] = {}
    for name, value in theirs.items():
        try:
            options[name] = URL_QUERY_ARGUMENT_PARSERS[name](value)
        except (TypeError, ValueError):
            raise ValueError(f"gateway.store: {name} in the Redis URL must be a {name} value") from None
    path = [part for part in parts.path.split("/") if part]
    if not path or len(path) > 2 or (len(path) == 2 and not path[1].isdigit()):
        raise ValueError("gateway.store: a redis+sentinel URL names its service: redis+sentinel://HOSTS/SERVICE[/DB]")
    return replace(
        parsed,
        sentinels=[_host_port(host) for host in parts.netloc.rpartition("@")[2].split(",")],
        service=unquote(path[0]),
        db=int(path[1]) if len(path) == 2 else 0,
        username=unquote(parts.username) if parts.username else None,
        password=unquote(parts.password) if parts.password else None,
        options=options,
    )


def _number(ours: dict[str, str], name: str, default: Any, kind: Callable[[str], Any], positive: bool = False) -> Any:
    if name not in ours:
        return default
    try:
        value = kind(ours[name])
    except ValueError:
        raise ValueError(f"gateway.store: {name} must be a number") from None
    if value < 0 or (positive and not value > 0):
        raise ValueError(f"gateway.store: {name} must be {'positive' if positive else 'zero or more'}")
    return value


def _host_port(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"gateway.store: sentinel address {text!r} is not HOST:PORT")
    return host.strip("[]"), int(port)
