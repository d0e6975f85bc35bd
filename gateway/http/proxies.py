"""Which peers may say who the client is (``[http] trusted_proxies``), and what their forwarded headers say.

A request's peer is the address its connection came from. Only a peer in ``trusted_proxies`` (none by default) is
believed when it names the client, the scheme and the host the client asked for; every other peer's forwarded
headers are ignored (and, without a verifier, refused: gateway/http/edge.py). uvicorn's own handling of these
headers, which trusts 127.0.0.1 by default, is switched off where ``serve`` builds it (``proxy_headers=False``),
so this module alone decides.

The client is read from the right of the chain the proxies appended to, since each appends the address that
connected to it: from the peer, step left while the address is itself a trusted proxy; the first that is not is
the client. What stands further left was written by the client and means nothing. A value that is no address
(``unknown``, an obfuscated name) stops the walk at the trusted proxy that wrote it, which then counts as the
client. Only the header family the config names is read (``[http] forwarded_headers``): a proxy that appends to
one family passes the other on as the client sent it.

    x-forwarded   X-Forwarded-For (the chain); X-Forwarded-Proto and X-Forwarded-Host, their last value
    forwarded     RFC 7239 ``Forwarded``: the chain of ``for=``; ``proto=`` and ``host=`` of the element whose
                  ``for=`` named the client

``source_key`` is how attempt limits count a client: an IPv4 address alone, an IPv6 address by its /64 (the
network one subscriber is given, from which it can take any number of addresses).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Family = Literal["x-forwarded", "forwarded"]

HOST = re.compile(r"^(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?$")
"""A forwarded host worth checking: a name or an address, an optional port (anything else is not believed)."""
SCHEMES = {"http", "https"}
IPV6_SOURCE_PREFIX = 64


@dataclass(frozen=True)
class Forwarded:
    """What a trusted proxy says of its client: the address (None: the proxy itself), scheme and host (None: as
    the proxy's own request)."""

    client: str | None
    scheme: str | None
    host: str | None


def address_of(text: str) -> Address | None:
    """The address in a forwarded value (``1.2.3.4``, ``1.2.3.4:80``, ``[2001:db8::1]:80``, ``2001:db8::1``), IPv4
    for an IPv4-mapped IPv6 one; None when it is none."""
    text = text.strip().strip('"')
    if text.startswith("["):
        text = text[1 : text.find("]")] if "]" in text else ""
    elif text.count(":") == 1:
        text = text.split(":", 1)[0]
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def source_key(peer: str) -> str:
    """How the attempt limits count a client: its IPv4 address, or its IPv6 address's /64."""
    address = address_of(peer)
    if address is None:
        return peer
    if isinstance(address, ipaddress.IPv6Address):
        return str(ipaddress.IPv6Network((address, IPV6_SOURCE_PREFIX), strict=False))
    return str(address)


class TrustedProxies:
    """The configured proxies, and what they say of a request."""

    def __init__(self, networks: Iterable[str], family: Family = "x-forwarded") -> None:
        self.networks: tuple[Network, ...] = tuple(ipaddress.ip_network(entry, strict=False) for entry in networks)
        self.family = family

    def trusts(self, address: Address | None) -> bool:
        """Whether an address is one of the trusted proxies."""
        return address is not None and any(address in network for network in self.networks)

    def forwarded(self, peer: str | None, headers: Sequence[tuple[bytes, bytes]]) -> Forwarded | None:
        """What the peer says of its client, or None when the peer is not trusted (its headers mean nothing)."""
        if peer is None or not self.trusts(address_of(peer)):
            return None
        if self.family == "forwarded":
            elements = _forwarded_elements(_values(headers, b"forwarded"))
            chain = [element.get("for", "") for element in elements]
            index = self._client_index(chain)
            chosen = elements[index] if index is not None else elements[-1] if elements else {}
            client = _address_text(chain[index]) if index is not None else None
            return Forwarded(client, _scheme(chosen.get("proto")), _host(chosen.get("host")))
        chain = [item for value in _values(headers, b"x-forwarded-for") for item in value.split(",")]
        index = self._client_index(chain)
        client = _address_text(chain[index]) if index is not None else None
        return Forwarded(
            client, _scheme(_last(headers, b"x-forwarded-proto")), _host(_last(headers, b"x-forwarded-host"))
        )

    def _client_index(self, chain: list[str]) -> int | None:
        """Where in the chain the client stands (None: the chain names nobody but the peer)."""
        for index in range(len(chain) - 1, -1, -1):
            address = address_of(chain[index])
            if address is None:
                return None  # written by a trusted proxy, and no address: that proxy is the client we know
            if not self.trusts(address):
                return index
        return 0 if chain else None


def _values(headers: Sequence[tuple[bytes, bytes]], name: bytes) -> list[str]:
    return [value.decode("latin-1") for key, value in headers if key.lower() == name]


def _last(headers: Sequence[tuple[bytes, bytes]], name: bytes) -> str | None:
    values = [item.strip() for value in _values(headers, name) for item in value.split(",")]
    return values[-1] if values else None


def _address_text(value: str) -> str | None:
    address = address_of(value)
    return None if address is None else str(address)


def _scheme(value: str | None) -> str | None:
    scheme = (value or "").strip().strip('"').lower()
    return scheme if scheme in SCHEMES else None


def _host(value: str | None) -> str | None:
    host = (value or "").strip().strip('"')
    return host if len(host) <= 255 and HOST.match(host) else None


def _forwarded_elements(values: list[str]) -> list[dict[str, str]]:
    """RFC 7239 elements (``for=a;proto=https, for=b``) as dicts of lower-cased parameter names; quoted values
    may hold commas and semicolons."""
    elements: list[dict[str, str]] = []
    for value in values:
        current: dict[str, str] = {}
        pair, quoted = "", False
        for char in value + ",":
            if char == '"':
                quoted = not quoted
            if not quoted and char in ",;":
                name, _, content = pair.partition("=")
                if name.strip():
                    current[name.strip().lower()] = content.strip()
                pair = ""
                if char == ",":
                    elements.append(current)
                    current = {}
                continue
            pair += char
    return elements
