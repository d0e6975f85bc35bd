"""The gateway's edge as an attacker meets it, against real ``serve`` processes: settings that would let a rebound
browser page or a relaying proxy reach an unauthenticated gateway refuse to start, requests relayed by a proxy
are refused, every route checks Host and Origin, forwarded headers count only from ``[http] trusted_proxies``
(the approver-token limits and the Host check see the peer otherwise), and odd token settings are refused at
start.

Two loopback addresses stand for two machines: the tests connect from 127.0.0.1 or from 127.0.0.2 (the client's
local address), and a config trusts one of them as its proxy."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.approvals import token_page_data
from tests.support.clients import INITIALIZE, POST_HEADERS
from tests.support.configs import config_data, write_config, write_toml
from tests.support.processes import free_port, process, serve
from tests.support.profiles import TENANTS

pytestmark = pytest.mark.anyio

STATIC_AUTH = {
    "verifier": "static",
    "resource_url": "https://gateway.example.com/mcp",
    "tokens": [{"sha256": hashlib.sha256(b"t").hexdigest(), "client_id": "c", "scopes": ["tenants:read"]}],
}


def refusal_at_start(config: Path) -> str:
    """``serve`` on a free loopback port must refuse before it listens (a minute at most), with exit status 2 and
    no traceback; its error output."""
    args = [sys.executable, "-m", "gateway", "serve", "--config", str(config), "--port", str(free_port())]
    done = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    return done.stderr


def edited(tmp: Path, change: Callable[[dict[str, Any]], None]) -> Path:
    data = config_data(TENANTS, tmp / "backend.db", *TENANTS.seed_demo, state_dir=tmp / "state")
    change(data)
    return write_toml(data, tmp / "gateway.toml")


def http(**settings: Any) -> Callable[[dict[str, Any]], None]:
    def change(data: dict[str, Any]) -> None:
        data["http"] = {**data.get("http", {}), **settings}

    return change


# --- 1. unsafe combinations refuse to start --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "change"),
    [
        ("http.dns_rebinding_protection", http(dns_rebinding_protection=False)),
        ("http.allowed_hosts", http(allowed_hosts=["127.0.0.1:*", "rebind.example.com:*"])),
        ("http.allowed_hosts", http(allowed_hosts=["0.0.0.0:*"])),
        ("http.allowed_origins", http(allowed_origins=["http://127.0.0.1:*", "https://rebind.example.com"])),
        ("http.trusted_proxies", http(trusted_proxies=["127.0.0.1"])),
    ],
)
def test_without_auth_settings_that_let_a_rebound_page_in_refuse_to_start(
    tmp_path: Path, key: str, change: Callable[[dict[str, Any]], None]
) -> None:
    assert key in refusal_at_start(edited(tmp_path, change))
    assert not (tmp_path / "backend.db").exists()  # refused before the backend was even started


async def test_the_insecure_flag_lets_such_a_config_start_and_says_so_loudly(tmp_path: Path) -> None:
    config, port = edited(tmp_path, http(dns_rebinding_protection=False)), free_port()
    log = tmp_path / "gateway.log"
    with log.open("w") as stderr:
        args = [sys.executable, "-m", "gateway", "serve", "--config", str(config), "--port", str(port)]
        async with (
            process([*args, "--insecure-listen-without-auth"], port, stderr=stderr),
            httpx.AsyncClient(timeout=60) as client,
        ):
            assert (await client.get(f"http://127.0.0.1:{port}/healthz")).status_code == 200
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    warnings = [line["msg"] for line in lines if line["level"] == "warning" and line["logger"] == "gateway"]
    assert any("http.dns_rebinding_protection" in warning for warning in warnings)


@pytest.mark.parametrize(
    "relayed",
    [
        {"X-Forwarded-For": "203.0.113.9"},
        {"X-Forwarded-Host": "gateway.example.com"},
        {"X-Forwarded-Proto": "https"},
        {"Forwarded": "for=203.0.113.9;host=gateway.example.com"},
    ],
    ids=lambda headers: next(iter(headers)),
)
async def test_without_auth_a_request_relayed_by_a_proxy_is_refused(tmp_path: Path, relayed: dict[str, str]) -> None:
    port = free_port()
    db = tmp_path / "backend.db"
    async with serve(write_config(TENANTS, tmp_path), port), httpx.AsyncClient(timeout=60) as client:
        base = f"http://127.0.0.1:{port}"
        assert (await client.get(f"{base}/readyz")).status_code == 200  # the backend is up and its database made
        opened = await client.post(f"{base}/mcp", json=INITIALIZE, headers={**POST_HEADERS, **relayed})
        probes = [(await client.get(f"{base}{path}", headers=relayed)).status_code for path in ("/healthz", "/metrics")]
        direct = await client.post(f"{base}/mcp", json=INITIALIZE, headers=POST_HEADERS)
    assert opened.status_code == 403
    assert opened.json()["code"] == "proxied_request_refused"
    assert "mcp-session-id" not in opened.headers
    assert probes == [403, 403]
    assert direct.status_code == 200
    assert TENANTS.write_count(db) == 0


# --- 2. every route is behind the transport checks -------------------------------------------------------------


@pytest.mark.parametrize(
    "foreign",
    [{"Host": "rebind.example.com"}, {"Origin": "http://rebind.example.com"}, {"Origin": "null"}],
    ids=["host", "origin", "null-origin"],
)
async def test_every_route_refuses_a_foreign_host_or_origin(tmp_path: Path, foreign: dict[str, str]) -> None:
    port = free_port()
    paths = ["/healthz", "/readyz", "/metrics", "/mcp", "/not-a-route"]
    async with serve(write_config(TENANTS, tmp_path), port), httpx.AsyncClient(timeout=60) as client:
        base = f"http://127.0.0.1:{port}"
        answers = {path: (await client.get(f"{base}{path}", headers=foreign)).status_code for path in paths}
        posted = await client.post(f"{base}/mcp", json=INITIALIZE, headers={**POST_HEADERS, **foreign})
        healthy = (await client.get(f"{base}/healthz")).status_code
    refused = 421 if "Host" in foreign else 403
    assert answers == dict.fromkeys(paths, refused)
    assert posted.status_code == refused
    assert healthy == 200


# --- 3. forwarded headers count only from a trusted proxy -------------------------------------------------------

PROXY = "127.0.0.2"
"""The address the trusting tests' proxy connects from (any 127/8 address is this machine's loopback)."""


def approval_page_config(tmp: Path, port: int, **settings: Any) -> Path:
    """A gateway with static bearer tokens for callers and approver tokens on its page at 127.0.0.1:port, with
    these ``[http]`` settings."""
    data = token_page_data(TENANTS, tmp, f"http://127.0.0.1:{port}")
    data["auth"] = {**STATIC_AUTH, "resource_url": f"http://127.0.0.1:{port}/mcp"}
    data["http"] = settings
    return write_toml(data, tmp / "gateway.toml")


def from_address(local: str, base: str) -> httpx.AsyncClient:
    """An HTTP client whose connections come from ``local``."""
    return httpx.AsyncClient(base_url=base, transport=httpx.AsyncHTTPTransport(local_address=local), timeout=60)


async def guesses(client: httpx.AsyncClient, forwarded: list[str | None]) -> list[int]:
    """One wrong approver token per entry (each a new one), sent with that X-Forwarded-For (None: without), and
    the statuses of the JSON API's answers."""
    statuses = []
    for n, address in enumerate(forwarded):
        headers = {"Authorization": f"Bearer wrong-{n}-{address}"}
        if address is not None:
            headers["X-Forwarded-For"] = address
        statuses.append((await client.get("/approvals/api/open", headers=headers)).status_code)
    return statuses


async def test_forwarded_for_from_a_peer_that_is_no_trusted_proxy_changes_no_bucket(tmp_path: Path) -> None:
    """A local client (a reverse proxy on the same host, or anyone on it) claims 40 addresses: it meets 429 at the
    same guess as one that claims none, because uvicorn's own trust of 127.0.0.1 is off and no proxy is trusted."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    async with serve(approval_page_config(tmp_path, port), port):
        async with from_address(PROXY, base) as plain:
            without = await guesses(plain, [None] * 40)
        async with from_address("127.0.0.1", base) as claiming:  # the peer uvicorn would trust by default
            claimed = await guesses(claiming, [f"203.0.113.{n}" for n in range(40)])
    assert without == [401] * 20 + [429] * 20
    assert claimed == without
    assert TENANTS.write_count(tmp_path / "backend.db") == 0


async def test_a_trusted_proxy_names_the_client_and_ipv6_counts_by_its_64(tmp_path: Path) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    async with serve(approval_page_config(tmp_path, port, trusted_proxies=[PROXY]), port):
        async with from_address(PROXY, base) as proxy:
            many = await guesses(proxy, [f"198.51.100.{n}" for n in range(30)])
            one_64 = await guesses(proxy, [f"2001:db8:1:2::{n:x}" for n in range(1, 22)])
            next_64 = await guesses(proxy, ["2001:db8:1:3::1"])
        async with from_address("127.0.0.1", base) as direct:  # the proxy's own claims did not touch this peer
            untrusted = await guesses(direct, ["198.51.100.1"])
    assert many == [401] * 30  # 30 clients, one guess each
    assert one_64 == [401] * 20 + [429]
    assert next_64 == [401]
    assert untrusted == [401]
    assert TENANTS.write_count(tmp_path / "backend.db") == 0


async def test_the_host_a_trusted_proxy_forwards_is_the_one_checked(tmp_path: Path) -> None:
    """The public name is allowed, not the address the proxy connects to: a trusted proxy's X-Forwarded-Host is
    checked, and the same header from any other peer is not believed."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    config = approval_page_config(tmp_path, port, trusted_proxies=[PROXY], allowed_hosts=["gw.example.com"])
    public = {"X-Forwarded-Host": "gw.example.com", "X-Forwarded-Proto": "https"}
    async with serve(config, port):
        async with from_address(PROXY, base) as proxy:
            relayed = (await proxy.get("/healthz", headers=public)).status_code
            unnamed = (await proxy.get("/healthz")).status_code
        async with from_address("127.0.0.1", base) as other:
            claimed = (await other.get("/healthz", headers=public)).status_code
    assert (relayed, unnamed, claimed) == (200, 421, 421)


# --- 4. odd token settings refuse to start ---------------------------------------------------------------------


def jwt_auth(**jwt: Any) -> Callable[[dict[str, Any]], None]:
    def change(data: dict[str, Any]) -> None:
        settings = {"issuer": "https://login.example.com", "jwks_url": "https://login.example.com/jwks.json", **jwt}
        data["auth"] = {"verifier": "jwt", "resource_url": "https://gateway.example.com/mcp", "jwt": settings}

    return change


def auth(**settings: Any) -> Callable[[dict[str, Any]], None]:
    def change(data: dict[str, Any]) -> None:
        data["auth"] = {**STATIC_AUTH, **settings}

    return change


def introspection(endpoint: str) -> Callable[[dict[str, Any]], None]:
    def change(data: dict[str, Any]) -> None:
        data["auth"] = {
            "verifier": "introspection",
            "resource_url": "https://gateway.example.com/mcp",
            "introspection": {"endpoint": endpoint},
        }

    return change


@pytest.mark.parametrize(
    ("key", "change"),
    [
        ("auth.jwt.algorithms", jwt_auth(algorithms=["none"])),
        ("auth.jwt.algorithms", jwt_auth(algorithms=["RS256", "None"])),
        ("auth.jwt.algorithms", jwt_auth(algorithms=["NONE"])),
        ("auth.jwt.algorithms", jwt_auth(algorithms=["hs256"])),
        ("auth.jwt.jwks_url", jwt_auth(jwks_url="http://login.example.com/jwks.json")),
        ("auth.introspection.endpoint", introspection("http://login.example.com/introspect")),
        ("auth.authorization_servers", auth(authorization_servers=["http://login.example.com"])),
        ("http.allowed_origins", lambda data: (auth()(data), http(allowed_origins=["http://*"])(data))),
        ("http.allowed_origins", lambda data: (auth()(data), http(allowed_origins=["null"])(data))),
        ("http.allowed_hosts", lambda data: (auth()(data), http(allowed_hosts=["*"])(data))),
    ],
)
def test_odd_token_and_origin_settings_refuse_to_start_naming_the_key(
    tmp_path: Path, key: str, change: Callable[[dict[str, Any]], None]
) -> None:
    assert key in refusal_at_start(edited(tmp_path, change))
