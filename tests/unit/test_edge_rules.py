"""The pure decisions behind the edge (over real HTTP: tests/system/test_edge.py, test_session_limits.py and
test_callers.py): what counts as loopback, which settings expose an unauthenticated gateway, how callers are
spelled and shown, and how session places are counted."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.config import ConfigError, parse_config
from gateway.config.loopback import is_loopback_host_pattern, is_loopback_origin_pattern, is_secure_url
from gateway.http.edge import exposure
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
    found = exposure(parse_config(data), "0.0.0.0")
    named = ["--host 0.0.0.0", "http.dns_rebinding_protection", "http.allowed_hosts", "http.allowed_origins"]
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
