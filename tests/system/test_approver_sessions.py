"""A revoked approver's old cookie approves nothing, against a real ``serve`` process, a real SDK client as the
agent (both eras) and Chromium as the approver's browser, with the backend's database asserted unchanged.

bob signs in on the approval page with his approver token and keeps his cookie (a stolen cookie, or a person
whose access was taken away). Then his session is revoked, by his own sign-out or by the operator taking his
token out of the config and restarting the gateway, and the cookie is presented again in a fresh browser: the
page asks to sign in, a forced Approve is refused, the agent's write still waits, and nothing is written.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from gateway.approvals.lifecycle import approval_id_for
from gateway.stores import open_store
from tests.support import browser
from tests.support.approvals import TOKENS, token_page_data
from tests.support.clients import error_code, new_key, preview
from tests.support.configs import write_toml
from tests.support.processes import free_port, serve
from tests.support.profiles import TENANTS

pytestmark = pytest.mark.anyio
ENV = {**os.environ, "GATEWAY_SECRET_KEY": "approver-sessions-tests-shared-secret-0123456789"}


@pytest.fixture(scope="module", autouse=True)
def chromium_installed() -> None:
    if not browser.available():
        if os.environ.get("CI"):
            pytest.fail(f"the approver session tests must run in CI: {browser.MISSING}")
        pytest.skip(browser.MISSING)


def gateway_config(tmp: Path, url: str, *, tokens_for: tuple[str, ...] = ("bob", "carol")) -> Path:
    data = token_page_data(TENANTS, tmp, url)
    kept = {_sha(TOKENS[who]) for who in tokens_for}
    data["approvals"]["tokens"] = [entry for entry in data["approvals"]["tokens"] if entry["sha256"] in kept]
    return write_toml(data, tmp / "gateway.toml")


def _sha(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@asynccontextmanager
async def gateway(config: Path, port: int) -> AsyncIterator[str]:
    async with serve(config, port, env=ENV):
        yield f"http://127.0.0.1:{port}"


async def waiting_write(url: str, era: str) -> tuple[str, dict[str, str]]:
    """The agent's write, waiting for approval: its approval id and the call's arguments."""
    async with Client(f"{url}/mcp", mode="legacy" if era == "2025-11-25" else "auto") as client:
        plan = await preview(client, TENANTS, TENANTS.spare)
        args = {"planId": plan["planId"], "idempotencyKey": new_key()}
        assert error_code(await client.call_tool(TENANTS.write_tool, args)) == "approval_pending"
    return approval_id_for(plan["planId"]), args


async def still_waiting(url: str, era: str, args: dict[str, str]) -> str:
    async with Client(f"{url}/mcp", mode="legacy" if era == "2025-11-25" else "auto") as client:
        return error_code(await client.call_tool(TENANTS.write_tool, args))


async def bob_signs_in(chromium: Any, url: str, approval_id: str) -> tuple[Any, list[Any], str]:
    """bob on the approval's page, signed in with his token: the tab, his cookies, the page's CSRF token."""
    context = await chromium.new_context()
    page = await context.new_page()
    await page.goto(f"{url}/approvals/{approval_id}")
    await page.fill("input[name=token]", TOKENS["bob"])
    await page.click("button[type=submit]")
    await page.wait_for_url(f"{url}/approvals/{approval_id}")
    assert await page.locator("button.approve").count() == 1
    return page, await context.cookies(), str(await page.get_attribute("input[name=csrf]", "value"))


async def replay(chromium: Any, url: str, approval_id: str, cookies: list[Any], csrf: str) -> tuple[str, int]:
    """The old cookies in a fresh browser: where the approval's page lands, and the status of a forced Approve."""
    context = await chromium.new_context()
    await context.add_cookies(cookies)
    page = await context.new_page()
    await page.goto(f"{url}/approvals/{approval_id}")
    forced = await page.request.post(
        f"{url}/approvals/{approval_id}", form={"csrf": csrf, "decision": "approve"}, max_redirects=0
    )
    return page.url, forced.status


async def decisions(tmp: Path, approval_id: str) -> list[str]:
    store = open_store(f"sqlite:{tmp}/gateway.db")
    try:
        approval = await store.get_approval(approval_id)
    finally:
        await store.close()
    return [] if approval is None else [decision.verdict for decision in approval.decisions]


async def test_a_signed_out_cookie_approves_nothing(tmp_path: Path, era: str) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    db = tmp_path / "backend.db"
    async with browser.chromium() as chromium, gateway(gateway_config(tmp_path, url), port):
        approval_id, args = await waiting_write(url, era)
        before = TENANTS.write_count(db), TENANTS.snapshot(db, TENANTS.spare)
        page, cookies, csrf = await bob_signs_in(chromium, url, approval_id)
        await page.click("button.link")  # sign out
        await page.wait_for_load_state()
        landed, forced = await replay(chromium, url, approval_id, cookies, csrf)
        assert "/approvals/login" in landed and forced == 403
        assert await still_waiting(url, era, args) == "approval_pending"
    assert await decisions(tmp_path, approval_id) == []
    assert (TENANTS.write_count(db), TENANTS.snapshot(db, TENANTS.spare)) == before


async def test_a_token_taken_out_of_the_config_and_a_restart_end_its_cookie(tmp_path: Path, era: str) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    db = tmp_path / "backend.db"
    async with browser.chromium() as chromium:
        async with gateway(gateway_config(tmp_path, url), port):
            approval_id, args = await waiting_write(url, era)
            before = TENANTS.write_count(db), TENANTS.snapshot(db, TENANTS.spare)
            _, cookies, csrf = await bob_signs_in(chromium, url, approval_id)
        async with gateway(gateway_config(tmp_path, url, tokens_for=("carol",)), port):  # bob's access taken away
            landed, forced = await replay(chromium, url, approval_id, cookies, csrf)
            assert "/approvals/login" in landed and forced == 403
            assert await still_waiting(url, era, args) == "approval_pending"
    assert await decisions(tmp_path, approval_id) == []
    assert (TENANTS.write_count(db), TENANTS.snapshot(db, TENANTS.spare)) == before
