"""Whether a name, a URL or an allow-list pattern stays on this machine (loopback), standard library only.

Without a verifier the gateway answers only loopback callers, and the config refuses plain ``http://`` for token
infrastructure anywhere but loopback; both questions come here. ``localhost`` counts as loopback (it resolves
there on any sane host); any other name does not, since DNS could point it anywhere.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit


def is_loopback(host: str) -> bool:
    """Whether a host name or address (IPv6 with or without brackets) is this machine."""
    host = host.removeprefix("[").removesuffix("]")
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def host_of_pattern(pattern: str) -> str:
    """The host of a ``Host`` allow-list entry: ``name``, ``name:port``, ``name:*``, ``[v6]`` or ``[v6]:port``."""
    if pattern.startswith("["):
        return pattern[: pattern.find("]") + 1] if "]" in pattern else pattern
    return pattern.rsplit(":", 1)[0] if pattern.count(":") == 1 else pattern


def is_loopback_host_pattern(pattern: str) -> bool:
    """Whether a ``Host`` allow-list entry only admits loopback names."""
    return is_loopback(host_of_pattern(pattern))


def is_loopback_origin_pattern(pattern: str) -> bool:
    """Whether an ``Origin`` allow-list entry (``http://127.0.0.1:*``) only admits loopback pages."""
    for scheme in ("http://", "https://"):
        if pattern.startswith(scheme):
            rest = pattern.removeprefix(scheme)
            return "/" not in rest and is_loopback_host_pattern(rest)
    return False


def is_secure_url(url: str) -> bool:
    """Whether a URL is ``https://``, or plain ``http://`` to this machine."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    if parts.scheme == "https" and parts.hostname:
        return True
    return parts.scheme == "http" and parts.hostname is not None and is_loopback(parts.hostname)


def loopback_port(url: str) -> int | None:
    """The port a URL names on this machine (its scheme's default when it names none); None for another host."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    if parts.hostname is None or not is_loopback(parts.hostname):
        return None
    return port if port is not None else 443 if parts.scheme == "https" else 80
