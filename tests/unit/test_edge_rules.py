"""The pure decisions behind the edge (over real HTTP: tests/system/test_edge.py, test_session_limits.py and
test_callers.py): what counts as loopback, which settings expose an unauthenticated gateway, whom forwarded
headers are believed from and what they then say, how callers are spelled and shown, and how session places are
counted."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.config import ConfigError, parse_config
from gateway.config.loopback import is_loopback_host_pattern, is_loopback_origin_pattern, is_secure_url
from gateway.http.edge import exposure
from gateway.http.proxies import Forwarded, TrustedProxies, source_key
from gateway.http.quota import SessionQuota
from gateway.identity.principal import Principal, decode, encode, readable
from tests.support.configs import config_data
from tests.support.profiles import TENANTS


@pytest.mark.parametrize(
    ("pattern", "loopback"),
    [
        ("127.0.0.1:*", True),
        ("127.0.0.2:8080", True),
        ("localhost", True),
        ("[::1]:*", True),
        ("::1", True),
        ("0.0.0.0:*", False),
        ("127.0.0.1.rebind.example.com:*", False),
        ("gateway.example.com", False),
        ("*", False),
    ],
)
def test_host_patterns_are_loopback_only_when_every_host_they_admit_is(pattern: str, loopback: bool) -> None:
    assert is_loopback_host_pattern(pattern) is loopback


@pytest.mark.parametrize(
    ("pattern", "loopback"),
    [
        ("http://127.0.0.1:*", True),
        ("https://localhost:8443", True),
        ("http://[::1]:*", True),
        ("http://localhost.rebind.example.com", False),
        ("http://127.0.0.1:*/path", False),
        ("null", False),
        ("file://", False),
    ],
)
def test_origin_patterns_are_loopback_only_for_loopback_pages(pattern: str, loopback: bool) -> None:
    assert is_loopback_origin_pattern(pattern) is loopback


@pytest.mark.parametrize(
    ("url", "secure"),
    [
        ("https://login.example.com/jwks.json", True),
        ("http://127.0.0.1:9000/introspect", True),
        ("http://[::1]/jwks", True),
        ("http://login.example.com/jwks.json", False),
        ("http://127.0.0.1.nip.io/jwks", False),
        ("ftp://login.example.com/jwks", False),
        ("https:///nohost", False),
    ],
)
def test_token_infrastructure_urls_are_https_or_loopback(url: str, secure: bool) -> None:
    assert is_secure_url(url) is secure


def test_exposure_names_each_setting_and_is_empty_with_a_verifier() -> None:
    data = config_data(TENANTS, Path("unused.db"), state_dir=Path("unused"))
    data["http"] = {
        "dns_rebinding_protection": False,
        "allowed_hosts": ["127.0.0.1:*", "gateway.example.com"],
        "allowed_origins": ["https://gateway.example.com"],
    }
    data["http"]["trusted_proxies"] = ["10.0.0.0/8"]
    found = exposure(parse_config(data), "0.0.0.0")
    named = [
        "--host 0.0.0.0",
        "http.trusted_proxies",
        "http.dns_rebinding_protection",
        "http.allowed_hosts",
        "http.allowed_origins",
    ]
    assert len(found) == len(named)
    assert all(key in line for key, line in zip(named, found, strict=True))
    data["auth"] = {
        "verifier": "static",
        "resource_url": "https://gateway.example.com/mcp",
        "tokens": [{"sha256": "0" * 64, "client_id": "c"}],
    }
    assert exposure(parse_config(data), "0.0.0.0") == []
    assert exposure(parse_config(config_data(TENANTS, Path("u.db"), state_dir=Path("u"))), "127.0.0.1") == []


def test_a_slash_in_a_client_id_makes_another_caller_than_a_subject_does() -> None:
    slashed = encode(Principal(issuer=None, client="console/alice", subject=None))
    split = encode(Principal(issuer=None, client="console", subject="alice"))
    assert slashed != split
    assert decode(slashed) == Principal(None, "console/alice", None)
    assert readable(slashed) == "console%2Falice (static token)"
    assert readable(split) == "console/alice (static token)"
    issued = encode(Principal("https://login.example.com", "console", "alice@example.com"))
    assert readable(issued) == "console/alice@example.com (https://login.example.com)"


@pytest.mark.parametrize("name", ["local", "console/alice", "x (static token)", '["a","b"]', "\u202eevil"])
def test_a_local_name_never_reads_as_a_token_caller(name: str) -> None:
    shown = readable(name)
    assert decode(name) is None
    if name == "local":
        assert shown == name
    else:
        assert shown.startswith('"')
    assert all(char.isprintable() and char not in "\u202e" for char in shown)


def test_session_places_are_given_back_once_whichever_way_a_session_ends() -> None:
    quota = SessionQuota(per_caller=2)
    first, second = quota.reserve("greedy"), quota.reserve("greedy")
    assert first is not None and second is not None
    assert quota.reserve("greedy") is None
    assert quota.reserve("other") is not None
    quota.admit(first, "s1")
    quota.settle(first)  # became a session: keeps its place
    quota.settle(second)  # the opening failed: its place is free
    assert quota.held("greedy") == 1
    quota.discard("s1")
    quota.discard("s1")
    assert quota.held("greedy") == 0


def test_a_local_name_cannot_be_spelled_like_a_token_caller() -> None:
    data = config_data(TENANTS, Path("unused.db"), state_dir=Path("unused"))
    data["gateway"] = {**data["gateway"], "stdio_caller": '[null,"console","alice"]'}
    with pytest.raises(ConfigError, match=r"gateway\.stdio_caller"):
        parse_config(data)


@pytest.mark.parametrize(
    ("approvals", "key"),
    [
        ({"public_url": "http://gw.test:8080"}, "approvals.public_url"),
        ({"login": "oidc", "oidc": {"client_id": "c", "issuer": "http://idp.example.com"}}, "approvals.oidc.issuer"),
        ({"webhooks": {"ops": {"url": "http://hooks.example.com/in"}}}, "approvals.webhooks.ops.url"),
    ],
)
def test_approval_urls_off_loopback_must_be_https_and_the_refusal_names_the_key(
    tmp_path: Path, approvals: dict[str, object], key: str
) -> None:
    data = config_data(TENANTS, tmp_path / "backend.db", state_dir=tmp_path)
    data["approvals"] = {"tokens": [{"sha256": "0" * 64, "subject": "alice"}], **approvals}
    with pytest.raises(ConfigError) as raised:
        parse_config(data)
    line = next(line.strip() for line in str(raised.value).splitlines() if line.strip().startswith(key))
    assert "must be an https:// URL (plain http:// only on loopback)" in line


@pytest.mark.parametrize(
    "approvals",
    [
        {"public_url": "http://127.0.0.1:8080"},
        {"public_url": "https://gw.example.com"},
        {"login": "oidc", "oidc": {"client_id": "c", "issuer": "https://idp.example.com"}},
        {"login": "oidc", "oidc": {"client_id": "c", "issuer": "http://localhost:4000"}},
        {"webhooks": {"ops": {"url": "http://[::1]:9000/in"}}},
    ],
)
def test_approval_urls_on_https_or_loopback_load(tmp_path: Path, approvals: dict[str, object]) -> None:
    data = config_data(TENANTS, tmp_path / "backend.db", state_dir=tmp_path)
    data["approvals"] = {"tokens": [{"sha256": "0" * 64, "subject": "alice"}], **approvals}
    parse_config(data)


PROXIES = ["127.0.0.1", "10.0.0.0/8", "2001:db8:ffff::/48"]


def headers(**values: str) -> list[tuple[bytes, bytes]]:
    return [(name.replace("_", "-").encode(), value.encode()) for name, value in values.items()]


@pytest.mark.parametrize(
    ("peer", "sent", "said"),
    [
        # a peer that is no trusted proxy: its headers mean nothing
        ("203.0.113.5", headers(x_forwarded_for="198.51.100.1"), None),
        ("127.0.0.2", headers(x_forwarded_for="198.51.100.1", x_forwarded_host="gw.example.com"), None),
        # the client is the first untrusted address from the right; what the client itself wrote is left of it
        ("127.0.0.1", headers(x_forwarded_for="198.51.100.1"), Forwarded("198.51.100.1", None, None)),
        ("127.0.0.1", headers(x_forwarded_for="6.6.6.6, 198.51.100.1"), Forwarded("198.51.100.1", None, None)),
        (
            "127.0.0.1",
            headers(x_forwarded_for="6.6.6.6, 198.51.100.1, 10.1.2.3"),
            Forwarded("198.51.100.1", None, None),
        ),
        ("10.9.9.9", headers(x_forwarded_for="10.1.1.1, 10.2.2.2"), Forwarded("10.1.1.1", None, None)),
        ("127.0.0.1", headers(x_forwarded_for="[2001:db8::7]:4711"), Forwarded("2001:db8::7", None, None)),
        ("127.0.0.1", headers(x_forwarded_for="::ffff:198.51.100.1"), Forwarded("198.51.100.1", None, None)),
        # a value that is no address, written by a trusted proxy: that proxy is the client known
        ("127.0.0.1", headers(x_forwarded_for="198.51.100.1, unknown"), Forwarded(None, None, None)),
        ("127.0.0.1", [], Forwarded(None, None, None)),
        # scheme and host: the nearest proxy's value, and only a plausible one
        (
            "127.0.0.1",
            headers(x_forwarded_for="198.51.100.1", x_forwarded_proto="HTTPS", x_forwarded_host="gw.example.com"),
            Forwarded("198.51.100.1", "https", "gw.example.com"),
        ),
        ("127.0.0.1", headers(x_forwarded_proto="gopher", x_forwarded_host="a b"), Forwarded(None, None, None)),
        (
            "127.0.0.1",
            headers(x_forwarded_host="evil.example.com, gw.example.com:443"),
            Forwarded(None, None, "gw.example.com:443"),
        ),
        # the other family is not read: a client can send it through a proxy that appends to this one
        ("127.0.0.1", headers(forwarded="for=6.6.6.6;proto=https;host=evil.example.com"), Forwarded(None, None, None)),
    ],
)
def test_forwarded_headers_count_only_from_a_trusted_proxy(
    peer: str, sent: list[tuple[bytes, bytes]], said: Forwarded | None
) -> None:
    assert TrustedProxies(PROXIES).forwarded(peer, sent) == said


@pytest.mark.parametrize(
    ("peer", "sent", "said"),
    [
        (
            "127.0.0.1",
            headers(forwarded="for=198.51.100.1;proto=https;host=gw.example.com"),
            Forwarded("198.51.100.1", "https", "gw.example.com"),
        ),
        (
            "127.0.0.1",
            headers(
                forwarded='for=6.6.6.6;host=evil.example.com, for="[2001:db8::1]:80";proto=http;host="gw.example.com"'
            ),
            Forwarded("2001:db8::1", "http", "gw.example.com"),
        ),
        ("10.0.0.1", headers(forwarded="for=198.51.100.1, for=10.0.0.2"), Forwarded("198.51.100.1", None, None)),
        ("127.0.0.1", headers(forwarded="for=_hidden"), Forwarded(None, None, None)),
        ("127.0.0.1", headers(x_forwarded_for="6.6.6.6"), Forwarded(None, None, None)),
        ("192.0.2.1", headers(forwarded="for=198.51.100.1"), None),
    ],
)
def test_rfc_7239_forwarded_when_the_proxies_write_it(
    peer: str, sent: list[tuple[bytes, bytes]], said: Forwarded | None
) -> None:
    assert TrustedProxies(PROXIES, "forwarded").forwarded(peer, sent) == said


def test_an_ipv6_source_counts_by_its_64_and_an_ipv4_one_by_its_address() -> None:
    one_network = {source_key(f"2001:db8:1:2::{n:x}") for n in range(1, 100)}
    assert one_network == {"2001:db8:1:2::/64"}
    assert source_key("2001:db8:1:3:ffff::1") == "2001:db8:1:3::/64"
    assert source_key("::ffff:198.51.100.7") == "198.51.100.7"
    assert len({source_key(f"198.51.100.{n}") for n in range(10)}) == 10
    assert source_key("unknown") == "unknown"
