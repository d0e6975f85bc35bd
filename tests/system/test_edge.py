"""The gateway's edge as an attacker meets it, against real ``serve`` processes: settings that would let a rebound
browser page or a relaying proxy reach an unauthenticated gateway refuse to start, requests relayed by a proxy
are refused, every route checks Host and Origin, and odd token settings are refused at start."""

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
