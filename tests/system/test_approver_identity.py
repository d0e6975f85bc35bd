"""One identity for a person, across every identity source, against the real OpenID provider (npm ``oidc-provider``).

Three gateways, one per caller verifier, share one backend: static tokens (dana's names the provider as her issuer),
JWT access tokens, and opaque tokens the gateway introspects (RFC 7662) at the provider. Each signs approvers in at
the same provider (in Chromium) and accepts approver tokens (dana's names the same issuer and subject). dana, as the
caller through each source, then tries to approve her own four-eyes write through each approver source: refused
every time, in both protocol eras, and the backend database never changes. One person holding an approver token and
a sign-in counts once toward ``approvers = 2``.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from gateway.approvals.lifecycle import approval_id_for
from gateway.config import parse_config
from gateway.identity.person import person_parts
from gateway.stores import open_store
from tests.support import browser, oidc
from tests.support.clients import error_body, error_code, new_key, preview
from tests.support.configs import config_data, write_toml
from tests.support.processes import free_port, http_backend, serve
from tests.support.profiles import TENANTS

pytestmark = pytest.mark.anyio
SOURCES = ["static", "jwt", "introspection"]
DANA_STATIC = "dana-static-caller-token-0123456789"
ALICE_STATIC = "alice-static-caller-token-0123456789"
DANA_APPROVER = "dana-approver-token-0123456789"
SCOPES = ["tenants:read", "tenants:reset"]


@pytest.fixture(scope="module", autouse=True)
def tools_installed() -> None:
    for ready, missing in ((browser.available(), browser.MISSING), (oidc.available(), oidc.MISSING)):
        if not ready:
            if os.environ.get("CI"):
                pytest.fail(f"the identity tests must run in CI: {missing}")
            pytest.skip(missing)


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass
class Site:
    """A gateway per caller source, the provider, the backend's database, and a browser."""

    urls: dict[str, str]
    provider: oidc.Provider
    db: Path
    stores: dict[str, str]
    browser: Any

    async def token(self, source: str, person: str) -> str:
        """``person``'s bearer token for the gateway of ``source``."""
        if source == "static":
            return {"dana": DANA_STATIC, "alice": ALICE_STATIC}[person]
        return await oidc.access_token(self.provider, f"{self.urls[source]}/mcp", person)


def auth_for(source: str, resource: str, provider: oidc.Provider) -> dict[str, Any]:
    """The [auth] table of the gateway whose callers come from ``source``."""
    if source == "static":
        tokens = [
            {
                "sha256": sha(secret),
                "client_id": f"{who}-cli",
                "subject": who,
                "issuer": provider.issuer,
                "scopes": SCOPES,
            }
            for who, secret in (("dana", DANA_STATIC), ("alice", ALICE_STATIC))
        ]
        return {"verifier": "static", "resource_url": resource, "tokens": tokens}
    if source == "jwt":
        return {
            "verifier": "jwt",
            "resource_url": resource,
            "jwt": {"issuer": provider.issuer, "jwks_url": provider.jwks_url},
        }
    return {
        "verifier": "introspection",
        "resource_url": resource,
        "introspection": {
            "endpoint": provider.introspection_url,
            "issuer": provider.issuer,
            "client_id_env": "INTROSPECTION_ID",
            "client_secret_env": "INTROSPECTION_SECRET",
            "cache_seconds": 0,
        },
    }


def _tools(tools: dict[str, Any]) -> None:
    tools["reset_tenant"].update(confirm="url", four_eyes=True, prompt_timeout_seconds=30)
    tools["preview_pair_reset"] = dict(tools["preview_tenant_reset"])
    tools["pair_reset"] = {**tools["reset_tenant"], "preview": "preview_pair_reset", "four_eyes": False, "approvers": 2}


@pytest.fixture(scope="module")
async def site(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Site]:
    tmp = tmp_path_factory.mktemp("identity")
    ports = {source: free_port() for source in SOURCES}
    urls = {source: f"http://127.0.0.1:{port}" for source, port in ports.items()}
    backend_port, db = free_port(), tmp / "backend.db"
    redirects = [f"{url}/approvals/callback" for url in urls.values()]
    async with (
        oidc.oidc_provider(f"{urls['jwt']}/mcp", *redirects, opaque=(f"{urls['introspection']}/mcp",)) as provider,
        http_backend(TENANTS, db, backend_port, *TENANTS.seed_demo),
        browser.chromium() as chromium,
    ):
        configs, stores = {}, {}
        for source, url in urls.items():
            stores[source] = f"sqlite:{tmp / source / 'gateway.db'}"
            backend = {"transport": "http", "url": f"http://127.0.0.1:{backend_port}/mcp"}
            data = config_data(TENANTS, db, store=stores[source], state_dir=tmp / source, backend=backend, tools=_tools)
            data["auth"] = auth_for(source, f"{url}/mcp", provider)
            data["approvals"] = {
                "public_url": url,
                "login": "oidc",
                "oidc": {"client_id": "gateway-approvals", "issuer": provider.issuer},
                "approvers": {"subjects": ["dana", "bob"]},
                "tokens": [{"sha256": sha(DANA_APPROVER), "issuer": provider.issuer, "subject": "dana"}],
            }
            parse_config(data)  # one identity space: check accepts it
            configs[source] = write_toml(data, tmp / f"{source}.toml")
        id_, secret = oidc.INTROSPECTION_CLIENT
        env = {**os.environ, "INTROSPECTION_ID": id_, "INTROSPECTION_SECRET": secret}
        async with (
            serve(configs["static"], ports["static"], env=env),
            serve(configs["jwt"], ports["jwt"], env=env),
            serve(configs["introspection"], ports["introspection"], env=env),
        ):
            yield Site(urls, provider, db, stores, chromium)


async def agent(site: Site, source: str, person: str, era: str) -> Client:
    """``person``'s agent on the gateway of ``source``, declaring no elicitation (it gets the link as a refusal)."""
    token = await site.token(source, person)
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
    mode = "legacy" if era == "2025-11-25" else "auto"
    return Client(streamable_http_client(f"{site.urls[source]}/mcp", http_client=http), mode=mode)


async def decided_by(site: Site, source: str, plan_id: str) -> list[tuple[str, str, str]]:
    """Each decision on a plan's approval: the approver's (issuer, subject) and the verdict."""
    store = open_store(site.stores[source])
    try:
        approval = await store.get_approval(approval_id_for(plan_id))
    finally:
        await store.close()
    decisions = [] if approval is None else approval.decisions
    return [(*(person_parts(d.approver) or ("?", "?")), d.verdict) for d in decisions]


async def approve_with_token(site: Site, source: str, approval_id: str) -> httpx.Response:
    """dana approves through the approvers' API with her approver token."""
    async with httpx.AsyncClient(base_url=site.urls[source], timeout=30) as http:
        return await http.post(
            f"/approvals/api/{approval_id}",
            json={"decision": "approve"},
            headers={"Authorization": f"Bearer {DANA_APPROVER}"},
        )


async def approve_signed_in(site: Site, url: str, person: str) -> tuple[bool, str]:
    """``person`` signs in at the provider in Chromium and presses Approve, or forces the POST when the page offers
    no button: (whether the button was offered, where the decision sent the browser)."""
    page = await (await site.browser.new_context()).new_page()
    await page.goto(url)
    await browser.sign_in_at_provider(page, person)
    await page.wait_for_url(url + "*")
    offered = await page.locator("button.approve").count() > 0
    token = await page.get_attribute("input[name=csrf]", "value")
    forced = await page.request.post(page.url, form={"csrf": token, "decision": "approve"}, max_redirects=0)
    return offered, forced.headers.get("location", "")


@pytest.mark.parametrize("approver", ["token", "sign-in"])
@pytest.mark.parametrize("source", SOURCES)
async def test_dana_cannot_approve_her_own_four_eyes_write_through_another_identity_source(
    site: Site, source: str, approver: str, era: str
) -> None:
    before = TENANTS.write_count(site.db), TENANTS.snapshot(site.db, TENANTS.spare)
    async with await agent(site, source, "dana", era) as client:
        plan = await preview(client, TENANTS, TENANTS.spare)
        args = {"planId": plan["planId"], "idempotencyKey": new_key()}
        pending = await client.call_tool("reset_tenant", args)
        assert error_code(pending) == "approval_pending"
        approval_id = approval_id_for(plan["planId"])
        if approver == "token":
            answer = await approve_with_token(site, source, approval_id)
            assert answer.status_code == 409 and answer.json()["refused"] == "own_write", answer.text
        else:
            offered, location = await approve_signed_in(site, error_body(pending)["details"]["url"], "dana")
            assert not offered and location.endswith("?notice=own_write")
        retried = await client.call_tool("reset_tenant", args)
    assert error_code(retried) == "approval_pending"
    assert await decided_by(site, source, plan["planId"]) == []
    assert (TENANTS.write_count(site.db), TENANTS.snapshot(site.db, TENANTS.spare)) == before


async def test_one_person_with_a_token_and_a_sign_in_counts_once_toward_two_approvers(site: Site, era: str) -> None:
    before = TENANTS.write_count(site.db)
    async with await agent(site, "jwt", "alice", era) as client:
        planned = await client.call_tool("preview_pair_reset", TENANTS.preview_args(TENANTS.other))
        plan = planned.structured_content or {}
        args = {"planId": plan["planId"], "idempotencyKey": new_key()}
        pending = await client.call_tool("pair_reset", args)
        url = error_body(pending)["details"]["url"]
        assert (await approve_with_token(site, "jwt", approval_id_for(plan["planId"]))).status_code == 200
        # dana again, signed in at the provider now: the page knows she has answered, and her yes counts once
        offered, _ = await approve_signed_in(site, url, "dana")
        assert not offered
        still = await client.call_tool("pair_reset", args)
        assert error_code(still) == "approval_pending"
        assert TENANTS.write_count(site.db) == before
        await approve_signed_in(site, url, "bob")
        applied = await client.call_tool("pair_reset", args)
    assert not applied.is_error, applied.content
    assert TENANTS.write_count(site.db) == before + 1
    issuer = site.provider.issuer
    assert await decided_by(site, "jwt", plan["planId"]) == [(issuer, "dana", "approve"), (issuer, "bob", "approve")]
