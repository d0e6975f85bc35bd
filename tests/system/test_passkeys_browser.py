"""Passkey approvals end to end: real ``serve`` replicas on a shared store (two on Redis, one on PostgreSQL), a real
SDK client as the agent in both eras, and Debian's Chromium with its virtual authenticator (the DevTools WebAuthn
domain: a CTAP2 authenticator with user verification) as the approver's browser and passkey.

bob signs in with his approver token, registers a passkey on /approvals/passkeys, and approves on the write's
page: passkey.js asks the authenticator to sign the challenge the page carries, and the gateway checks it. The
write then runs once on the other replica, ``audit verify`` checks the signature offline, and an exported bundle
verifies with neither config nor store. A revoked passkey, an authenticator that reports no user verification and
an approval row written straight into the store each leave the backend database unchanged.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from gateway.approvals.lifecycle import approval_id_for
from gateway.identity.person import person_id
from gateway.records import Decision
from gateway.stores import open_store
from tests.support import browser
from tests.support.approvals import TOKENS, token_page_data
from tests.support.clients import error_body, error_code, new_key, preview
from tests.support.configs import write_toml
from tests.support.processes import ROOT, free_port, serve
from tests.support.profiles import TENANTS

pytestmark = pytest.mark.anyio
ENV = {**os.environ, "GATEWAY_SECRET_KEY": "passkey-browser-tests-shared-secret-0123456789"}
AUTHENTICATOR = {
    "protocol": "ctap2",
    "transport": "internal",
    "hasResidentKey": True,
    "hasUserVerification": True,
    "isUserVerified": True,
}


@pytest.fixture(scope="module", autouse=True)
def chromium_installed() -> None:
    if not browser.available():
        if os.environ.get("CI"):
            pytest.fail(f"the passkey browser tests must run in CI: {browser.MISSING}")
        pytest.skip(browser.MISSING)


@dataclass
class Site:
    page: str
    """The approval page's public URL (http://localhost:PORT: a secure context, relying party ``localhost``)."""
    other: str
    """Another replica on the same store, where the agent retries."""
    config: Path
    store: str
    db: Path


@asynccontextmanager
async def site(tmp: Path, store: str, replicas: int = 2) -> AsyncIterator[Site]:
    ports = [free_port() for _ in range(replicas)]
    page = f"http://localhost:{ports[0]}"
    data = token_page_data(TENANTS, tmp, page)
    data["gateway"]["store"] = store
    data["approvals"]["passkey"] = "required"
    config = write_toml(data, tmp / "gateway.toml")
    async with AsyncExitStack() as stack:
        for port in ports:
            await stack.enter_async_context(serve(config, port, env=ENV))
        yield Site(page, f"http://127.0.0.1:{ports[-1]}", config, store, tmp / "backend.db")


@asynccontextmanager
async def approver(chromium: Any, page_url: str) -> AsyncIterator[tuple[Any, Any, str]]:
    """bob in a browser with a virtual authenticator, signed in: the tab, the DevTools session, the authenticator."""
    context = await chromium.new_context()
    try:
        tab = await context.new_page()
        devtools = await context.new_cdp_session(tab)
        await devtools.send("WebAuthn.enable")
        added = await devtools.send("WebAuthn.addVirtualAuthenticator", {"options": AUTHENTICATOR})
        await tab.goto(f"{page_url}/approvals/passkeys")
        await tab.fill("input[name=token]", TOKENS["bob"])
        await tab.click("button[type=submit]")
        await tab.wait_for_url(f"{page_url}/approvals/passkeys")
        yield tab, devtools, added["authenticatorId"]
    finally:
        await context.close()


async def enrol(tab: Any) -> str:
    """Register a passkey on the page: its credential id as the gateway keeps it."""
    await tab.fill("input[name=label]", "virtual authenticator")
    async with tab.expect_navigation():
        await tab.click("form[data-enrol] button[type=submit]")
    assert "is registered" in await tab.inner_text("main"), await tab.inner_text("main")
    return str(await tab.inner_text("table code")).rstrip("…")


async def press(tab: Any, page_url: str, approval_id: str, button: str) -> str:
    """Open the write's page and press a button that signs: where the page lands."""
    await tab.goto(f"{page_url}/approvals/{approval_id}")
    async with tab.expect_navigation():
        await tab.click(button)
    return str(tab.url)


async def waiting_write(url: str, era: str, target: str) -> tuple[str, dict[str, str]]:
    async with Client(f"{url}/mcp", mode="legacy" if era == "2025-11-25" else "auto") as client:
        plan = await preview(client, TENANTS, target)
        args = {"planId": plan["planId"], "idempotencyKey": new_key()}
        assert error_code(await client.call_tool(TENANTS.write_tool, args)) == "approval_pending"
    return approval_id_for(plan["planId"]), args


async def call(url: str, era: str, args: dict[str, str]) -> Any:
    async with Client(f"{url}/mcp", mode="legacy" if era == "2025-11-25" else "auto") as client:
        return await client.call_tool(TENANTS.write_tool, args)


async def cli(*args: str) -> tuple[int, str]:
    done = await anyio.run_process([sys.executable, "-m", "gateway", *args], cwd=ROOT, check=False, env=ENV)
    return done.returncode, (done.stdout + done.stderr).decode()


async def test_a_passkey_signed_yes_runs_the_write_once_on_another_replica_and_verifies_offline(
    tmp_path: Path, redis_url: str, era: str
) -> None:
    await signed_yes_runs_once(tmp_path, redis_url, era, replicas=2)


async def test_on_postgresql_too(tmp_path: Path, postgres_url: str) -> None:
    await signed_yes_runs_once(tmp_path, postgres_url, "2026-07-28", replicas=1)


async def signed_yes_runs_once(tmp: Path, store: str, era: str, replicas: int) -> None:
    async with browser.chromium() as chromium, site(tmp, store, replicas) as gw:
        approval_id, args = await waiting_write(gw.other, era, TENANTS.main)
        rejected_id, rejected_args = await waiting_write(gw.other, era, TENANTS.other)
        async with approver(chromium, gw.page) as (tab, _, _):
            await enrol(tab)
            await tab.goto(f"{gw.page}/approvals/{approval_id}")
            assert "needs your passkey" in await tab.inner_text("main")
            landed = await press(tab, gw.page, approval_id, "button.approve")
            assert landed == f"{gw.page}/approvals/{approval_id}", landed
            await press(tab, gw.page, rejected_id, "button.reject")  # Reject asks once more; "Yes, reject" signs
            async with tab.expect_navigation():
                await tab.click("button.confirm")
            assert tab.url == f"{gw.page}/approvals/{rejected_id}", tab.url
        assert error_code(await call(gw.other, era, rejected_args)) == "not_confirmed"
        done = await call(gw.other, era, args)
        assert not done.is_error, done.content
        assert TENANTS.write_count(gw.db) == 1
        status, said = await cli("audit", "verify", "--config", str(gw.config))
        assert status == 0 and said.startswith("ok"), said
        status, exported = await cli("audit", "export", "--plan", args["planId"], "--config", str(gw.config))
        assert status == 0, exported
    bundle = tmp / "evidence.json"
    bundle.write_text(exported)
    status, said = await cli("audit", "verify", "--bundle", str(bundle))
    assert status == 0 and "1 passkey signature(s) verified" in said, said  # the plan's one yes
    assert "key   " in said and "bob (static)" in said, said  # the keys it trusted, to compare with the approver's
    forged = json.loads(exported)
    approval = next(entry for entry in forged["entries"] if entry["outcome"] == "approval")
    approval["extra"]["passkey"]["signed"]["factsDigest"] = "0" * 64  # the bundle altered after export
    bundle.write_text(json.dumps(forged))
    status, said = await cli("audit", "verify", "--bundle", str(bundle))
    assert status == 1 and "does not hold" in said, said


async def test_a_revoked_passkey_no_user_verification_and_a_forged_row_write_nothing(
    tmp_path: Path, redis_url: str
) -> None:
    era = "2026-07-28"
    async with browser.chromium() as chromium, site(tmp_path, redis_url) as gw:
        unverified_id, unverified_args = await waiting_write(gw.other, era, TENANTS.main)
        revoked_id, revoked_args = await waiting_write(gw.other, era, TENANTS.other)
        forged_id, forged_args = await waiting_write(gw.other, era, TENANTS.spare)
        before = TENANTS.write_count(gw.db)
        async with approver(chromium, gw.page) as (tab, devtools, authenticator):
            credential = await enrol(tab)
            await devtools.send("WebAuthn.setUserVerified", {"authenticatorId": authenticator, "isUserVerified": False})
            # Chromium's authenticator cannot verify the user, so it answers nothing (or an assertion without the
            # flag, which the gateway refuses): either way no decision is taken.
            await tab.goto(f"{gw.page}/approvals/{unverified_id}")
            await tab.click("button.approve")
            said = await tab.wait_for_selector(".passkey-status, p.notice.refused")
            assert "did not answer" in await said.inner_text() or tab.url.endswith("?notice=unsigned")
            await devtools.send("WebAuthn.setUserVerified", {"authenticatorId": authenticator, "isUserVerified": True})
            listed = json.loads((await cli("approvals", "passkeys", "--json", "--config", str(gw.config)))[1])
            assert listed["credentialId"].startswith(credential) and listed["revokedAt"] is None
            status, said = await cli(
                "approvals", "passkeys", "--revoke", listed["credentialId"], "--config", str(gw.config)
            )
            assert status == 0 and said.startswith("revoked"), said
            landed = await press(tab, gw.page, revoked_id, "button.approve")
            assert landed.endswith("?notice=unsigned"), landed
        store = open_store(gw.store)
        try:
            stored = await store.get_approval(forged_id)
            assert stored is not None
            bob = person_id("static", "bob")
            await store.replace_approval(
                replace(stored, decisions=(Decision(bob, "Bob", "approve", stored.requested_at),))
            )
            states = [await store.get_approval(each) for each in (unverified_id, revoked_id)]
        finally:
            await store.close()
        assert [approval.decisions if approval else None for approval in states] == [(), ()]
        for args in (unverified_args, revoked_args):
            assert error_code(await call(gw.other, era, args)) == "approval_pending"
        refused = await call(gw.other, era, forged_args)
        assert error_code(refused) == "not_confirmed"
        assert error_body(refused)["details"]["unsigned"] == ["Bob: no passkey signature"]
        status, said = await cli("audit", "verify", "--config", str(gw.config))
        assert status == 1 and f"approval {forged_id}" in said and "a yes no person signed" in said, said
    assert TENANTS.write_count(gw.db) == before
