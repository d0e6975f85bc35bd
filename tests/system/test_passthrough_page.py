"""A pass-through write with ``confirm = "url"`` waits for a person signed in on the approval page, in both eras:
a real ``serve`` over both demo backends, a real OpenID provider (the agent's token and the approver's sign-in),
a real SDK client as the agent and Debian's Chromium as the approver's browser."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from gateway.stores import open_store
from tests.support import browser, oidc
from tests.support.clients import error_code, new_key
from tests.support.configs import together_data, write_toml
from tests.support.processes import free_port, serve
from tests.support.profiles import FLAGS, TENANTS

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module", autouse=True)
def tools_installed() -> None:
    missing = browser.MISSING if not browser.available() else oidc.MISSING if not oidc.available() else None
    if missing is not None:
        if os.environ.get("CI"):
            pytest.fail(f"the approval page tests must run in CI: {missing}")
        pytest.skip(missing)


@dataclass
class Site:
    url: str
    resource: str
    provider: oidc.Provider
    flags_db: Path
    store: str
    browser: Any


@pytest.fixture(scope="module")
async def site(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Site]:
    tmp = tmp_path_factory.mktemp("passthrough-page")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    tenants_db, store = tmp / "tenants.db", f"sqlite:{tmp}/gateway.db"
    async with oidc.oidc_provider(f"{url}/mcp", f"{url}/approvals/callback") as provider, browser.chromium() as chrome:
        data = together_data(TENANTS, tenants_db, *TENANTS.seed_demo, state_dir=tmp / "state", store=store)
        data["tools"]["describe_flag"] = {
            **data["tools"]["describe_flag"],
            "confirm": "url",
            "scopes": ["tenants:reset"],  # a scope the provider grants the agent
            "prompt_timeout_seconds": 60,
        }
        data["auth"] = {
            "verifier": "jwt",
            "resource_url": f"{url}/mcp",
            "jwt": {"issuer": provider.issuer, "jwks_url": provider.jwks_url},
        }
        data["approvals"] = {
            "public_url": url,
            "login": "oidc",
            "oidc": {"client_id": "gateway-approvals"},
            "approvers": {"subjects": ["bob"]},
        }
        async with serve(write_toml(data, tmp / "gateway.toml"), port):
            yield Site(url, f"{url}/mcp", provider, tenants_db.with_name(f"{FLAGS.name}.db"), store, chrome)


async def both_backends_up(client: Client) -> None:
    """Until ``tools/list`` has the flags backend's tool: each list retries a backend that is not up yet (a
    loaded machine may start the second stdio child late)."""
    with anyio.fail_after(60):
        while "describe_flag" not in {tool.name for tool in (await client.list_tools()).tools}:  # noqa: ASYNC110
            await anyio.sleep(0.5)


def description(db: Path) -> str:
    with sqlite3.connect(db) as conn:
        return str(conn.execute("SELECT description FROM flags WHERE key = ?", (FLAGS.main,)).fetchone()[0])


async def test_a_passthrough_write_waits_for_a_signed_in_person_and_writes_once(site: Site, era: str) -> None:
    seen: list[str] = []

    async def bob_approves(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestURLParams)
        seen.append(params.url)
        page = await (await site.browser.new_context()).new_page()
        await page.goto(params.url)
        await browser.sign_in_at_provider(page, "bob")
        await page.wait_for_url(params.url + "*")
        assert "describe_flag" in await page.inner_text("main")
        await page.click("button.approve")
        await page.wait_for_load_state()
        return types.ElicitResult(action="accept")

    token = await oidc.access_token(site.provider, site.resource, "alice")
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=90)
    mode = "legacy" if era == "2025-11-25" else "auto"
    text = f"approved in a browser ({era})"
    args = {"key": FLAGS.main, "description": text, "idempotencyKey": new_key()}
    agent = Client(streamable_http_client(f"{site.url}/mcp", http_client=http), mode=mode, elicitation_callback=None)
    async with agent as client:
        await both_backends_up(client)
        before = FLAGS.write_count(site.flags_db)
        pending = await client.call_tool("describe_flag", args)  # no url elicitation declared: the link as a refusal
        assert error_code(pending) == "approval_pending"
        assert FLAGS.write_count(site.flags_db) == before
    agent = Client(
        streamable_http_client(f"{site.url}/mcp", http_client=http), mode=mode, elicitation_callback=bob_approves
    )
    async with agent as client:
        applied = await client.call_tool("describe_flag", args)
        replayed = await client.call_tool("describe_flag", args)
    assert not applied.is_error, applied.content
    assert replayed.structured_content == {**(applied.structured_content or {}), "replayed": True}
    assert len(seen) == 1 and description(site.flags_db) == text
    assert FLAGS.write_count(site.flags_db) == before + 1
    store = open_store(site.store)
    try:
        entries = [e async for e in store.audit_entries() if e.idempotency_key == args["idempotencyKey"]]
    finally:
        await store.close()
    bob = {"issuer": site.provider.issuer, "subject": "bob", "display": "bob@example.test"}
    assert [(e.outcome, e.extra.get("mode"), e.extra.get("approvers")) for e in entries] == [
        ("refused", "url", None),
        ("applied", "url", [bob]),
        ("returned", "url", [bob]),  # what the caller was answered, after the backend call
        ("replayed", None, None),
    ]
