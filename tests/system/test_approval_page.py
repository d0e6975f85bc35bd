"""The approval page end to end: real `serve` replicas on Redis, a real OpenID provider (npm ``oidc-provider``) that
issues the agent's token and signs approvers in, a real SDK client as the agent in both eras, and Debian's
Chromium as the approver's browser.

The agent is ``alice`` (her JWT access token from the provider); approvers sign in on the provider's own login page
through the gateway's authorization-code + PKCE login. ``reset_tenant`` needs one approval and four eyes.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from gateway.approvals.lifecycle import approval_id_for
from gateway.identity.person import person_parts
from gateway.records import AuditEntry
from gateway.stores import open_store
from tests.support import browser, oidc
from tests.support.clients import error_body, error_code, new_key, preview
from tests.support.configs import config_data, write_toml
from tests.support.processes import free_port, http_backend, serve
from tests.support.profiles import TENANTS

pytestmark = pytest.mark.anyio
QUICK_TTL = 4


def _missing() -> str | None:
    if not browser.available():
        return browser.MISSING
    if not oidc.available():
        return oidc.MISSING
    if shutil.which("redis-server") is None:
        return "redis-server is missing (.ci/setup-redis.sh)"
    return None


@pytest.fixture(scope="module", autouse=True)
def tools_installed() -> None:
    missing = _missing()
    if missing is not None:
        if os.environ.get("CI"):
            pytest.fail(f"the approval page tests must run in CI: {missing}")
        pytest.skip(missing)


APPROVERS = ["alice", "bob", "carol", "mallory"]
"""Who [approvals.approvers] lets decide (alice too, so that four eyes, not the rule, stops her own write);
trudy has an account at the provider and is not among them."""
CHOSEN_NAMES = {"mallory": {"name": "Bob Builder"}}
"""What people set about themselves at the provider: mallory calls herself Bob Builder."""
GROUPS: dict[str, dict[str, Any]] = {
    "erin": {"groups": ["staff", "sre-oncall"]},
    "frank": {"groups": ["staff", "sre"], "name": "sre-oncall"},
}
"""What the provider states about people's groups: erin is on call (the approver condition admits her by it);
frank is not, whatever he calls himself."""
APPROVER_CONDITION = '"sre-oncall" in approver.claims.groups && approver.iss.startsWith("http://127.0.0.1:")'


@dataclass
class Site:
    """Two gateway replicas on one Redis and one backend, the identity provider, and a browser."""

    urls: list[str]
    resource: str
    provider: oidc.Provider
    db: Path
    store: str
    browser: Any
    configs: list[Path]

    def page(self, replica: int, approval_id: str) -> str:
        return f"{self.urls[replica]}/approvals/{approval_id}"


def _tools(tools: dict[str, Any]) -> None:
    tools["reset_tenant"].update(confirm="url", four_eyes=True, prompt_timeout_seconds=60)
    tools["preview_quick_reset"] = {**tools["preview_tenant_reset"], "plan_ttl_seconds": QUICK_TTL}
    tools["quick_reset"] = {**tools["reset_tenant"], "preview": "preview_quick_reset"}


@pytest.fixture(scope="module")
async def site(tmp_path_factory: pytest.TempPathFactory, redis_server: str) -> AsyncIterator[Site]:
    tmp = tmp_path_factory.mktemp("approval-page")
    ports, backend_port = [free_port(), free_port()], free_port()
    urls = [f"http://127.0.0.1:{port}" for port in ports]
    resource = f"{urls[0]}/mcp"  # the address behind the load balancer: the one audience of every replica
    db = tmp / "backend.db"
    async with (
        oidc.oidc_provider(
            resource, *(f"{url}/approvals/callback" for url in urls), claims={**CHOSEN_NAMES, **GROUPS}
        ) as provider,
        http_backend(TENANTS, db, backend_port, *TENANTS.seed_demo),
        browser.chromium() as chromium,
    ):
        configs = []
        for number, url in enumerate(urls):
            backend = {"transport": "http", "url": f"http://127.0.0.1:{backend_port}/mcp"}
            data = config_data(TENANTS, db, store=redis_server, state_dir=tmp / "state", backend=backend, tools=_tools)
            data["auth"] = {
                "verifier": "jwt",
                "resource_url": resource,
                "jwt": {"issuer": provider.issuer, "jwks_url": provider.jwks_url},
            }
            data["approvals"] = {
                "public_url": url,
                "login": "oidc",
                "oidc": {"client_id": "gateway-approvals"},
                "approvers": {"subjects": APPROVERS, "when": APPROVER_CONDITION, "claims": {"groups": "list"}},
            }
            configs.append(write_toml(data, tmp / f"gateway{number}.toml"))
        env = {**os.environ, "GATEWAY_SECRET_KEY": "approval-page-tests-shared-secret-key-0123456789"}
        async with serve(configs[0], ports[0], env=env), serve(configs[1], ports[1], env=env):
            yield Site(urls, resource, provider, db, redis_server, chromium, configs)


async def agent(site: Site, era: str, replica: int = 0, answers: Any = None) -> Client:
    """alice's agent: her access token, one protocol era, and (with ``answers``) url elicitation declared."""
    token = await oidc.access_token(site.provider, site.resource, "alice")
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=90)
    mode = "legacy" if era == "2025-11-25" else "auto"
    return Client(
        streamable_http_client(f"{site.urls[replica]}/mcp", http_client=http), mode=mode, elicitation_callback=answers
    )


async def signed_in(site: Site, url: str, person: str, **context: Any) -> Any:
    """A browser tab on ``url``, signed in as ``person`` at the identity provider on the way (``context``: the
    browser's own settings, such as its time zone)."""
    page = await (await site.browser.new_context(**context)).new_page()
    await page.goto(url)
    await browser.sign_in_at_provider(page, person)
    await page.wait_for_url(url + "*")
    return page


def opens_the_link(site: Site, decide: Callable[[str], Awaitable[None]]) -> Any:
    """The user's side of a url elicitation: open the link (``decide`` acts on the page), then say it is done."""

    async def answer(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestURLParams)
        await decide(params.url)
        return types.ElicitResult(action="accept")

    return answer


async def decisions(site: Site, plan_id: str) -> list[tuple[str, str]]:
    """Who decided a plan's approval (by subject at the site's provider), and how."""
    store = open_store(site.store)
    try:
        approval = await store.get_approval(approval_id_for(plan_id))
    finally:
        await store.close()
    found = [] if approval is None else [(person_parts(d.approver), d.verdict) for d in approval.decisions]
    assert all(parts is not None and parts[0] == site.provider.issuer for parts, _ in found)
    return [(parts[1], verdict) for parts, verdict in found if parts is not None]


async def audit_of(site: Site, plan_id: str) -> list[AuditEntry]:
    store = open_store(site.store)
    try:
        return [entry async for entry in store.audit_entries() if entry.plan_id == plan_id]
    finally:
        await store.close()


async def screenshot(page: Any, name: str, tmp_path: Path) -> None:
    """A picture of the page as the browser shows it; with GATEWAY_SCREENSHOTS set, copied there (docs/images/)."""
    shot = tmp_path / name
    await page.screenshot(path=str(shot), full_page=True)
    if os.environ.get("GATEWAY_SCREENSHOTS"):
        shutil.copy(shot, Path(os.environ["GATEWAY_SCREENSHOTS"]) / name)


async def test_an_approver_signs_in_approves_and_the_write_applies_once(site: Site, era: str, tmp_path: Path) -> None:
    async def bob_approves(url: str) -> None:
        page = await signed_in(site, url, "bob", timezone_id="Europe/Berlin", locale="en-GB")
        await screenshot(page, "approval-page.png", tmp_path)
        await page.click("button.approve")
        await page.wait_for_load_state()
        assert "approved" in await page.inner_text("dd.state")

    before = TENANTS.write_count(site.db)
    async with await agent(site, era, answers=opens_the_link(site, bob_approves)) as client:
        plan = await preview(client, TENANTS)
        args = {"planId": plan["planId"], "idempotencyKey": new_key()}
        result = await client.call_tool("reset_tenant", args)
        again = await client.call_tool("reset_tenant", args)
    assert not result.is_error, result.content
    assert again.structured_content == {**(result.structured_content or {}), "replayed": True}
    assert TENANTS.write_count(site.db) == before + 1
    assert await decisions(site, plan["planId"]) == [("bob", "approve")]
    applied = [e for e in await audit_of(site, plan["planId"]) if e.idempotency_key == args["idempotencyKey"]]
    bob = {"issuer": site.provider.issuer, "subject": "bob", "display": "bob@example.test"}
    assert [(e.outcome, e.extra.get("mode"), e.extra.get("approvers")) for e in applied][:1] == [
        ("applied", "url", [bob])
    ]


async def test_a_rejected_write_writes_nothing(site: Site, era: str) -> None:
    async def carol_rejects(url: str) -> None:
        page = await signed_in(site, url, "carol")
        await page.click("button.reject")
        await page.wait_for_load_state()
        assert await page.inner_text("h1") == "Reject this write?"  # asked once more
        await page.click("button.confirm")
        await page.wait_for_load_state()
        assert await page.inner_text("h1") == "Rejected"

    before = TENANTS.snapshot(site.db, TENANTS.other), TENANTS.write_count(site.db)
    async with await agent(site, era, answers=opens_the_link(site, carol_rejects)) as client:
        plan = await preview(client, TENANTS, TENANTS.other)
        result = await client.call_tool("reset_tenant", {"planId": plan["planId"], "idempotencyKey": new_key()})
    assert error_code(result) == "not_confirmed"
    assert (TENANTS.snapshot(site.db, TENANTS.other), TENANTS.write_count(site.db)) == before
    assert await decisions(site, plan["planId"]) == [("carol", "reject")]


async def test_the_caller_cannot_approve_their_own_four_eyes_write(site: Site) -> None:
    before = TENANTS.write_count(site.db)
    async with await agent(site, "2026-07-28") as client:  # declares no elicitation: gets the link as a refusal
        plan = await preview(client, TENANTS, TENANTS.spare)
        pending = await client.call_tool("reset_tenant", {"planId": plan["planId"], "idempotencyKey": new_key()})
    assert error_code(pending) == "approval_pending"
    page = await signed_in(site, error_body(pending)["details"]["url"], "alice")
    assert await page.locator("button.approve").count() == 0
    assert "someone else must approve" in await page.inner_text("main")
    token = await page.get_attribute("input[name=csrf]", "value")  # the sign-out form's: a valid session token
    forced = await page.request.post(page.url, form={"csrf": token, "decision": "approve"}, max_redirects=0)
    assert forced.status == 303 and forced.headers["location"].endswith("?notice=own_write")
    assert await decisions(site, plan["planId"]) == []
    assert TENANTS.write_count(site.db) == before


async def test_a_person_the_provider_signs_in_who_is_no_approver_cannot_approve(site: Site) -> None:
    """trudy has an account at the organisation's identity provider, but is not in [approvals.approvers]:
    the page offers her no buttons, a forced POST records nothing, and nothing is written."""
    before = TENANTS.write_count(site.db), TENANTS.snapshot(site.db, TENANTS.spare)
    async with await agent(site, "2026-07-28") as client:
        plan = await preview(client, TENANTS, TENANTS.spare)
        pending = await client.call_tool("reset_tenant", {"planId": plan["planId"], "idempotencyKey": new_key()})
    page = await signed_in(site, error_body(pending)["details"]["url"], "trudy")
    assert await page.locator("button.approve").count() == 0
    assert "not as one of this gateway's approvers" in await page.inner_text("main")
    token = await page.get_attribute("input[name=csrf]", "value")
    forced = await page.request.post(page.url, form={"csrf": token, "decision": "approve"}, max_redirects=0)
    assert forced.status == 303 and forced.headers["location"].endswith("?notice=not_an_approver")
    assert await decisions(site, plan["planId"]) == []
    assert (TENANTS.write_count(site.db), TENANTS.snapshot(site.db, TENANTS.spare)) == before


async def test_the_approver_condition_admits_by_the_providers_groups_and_no_one_else(site: Site) -> None:
    """``[approvals.approvers] when`` reads the groups the provider states: erin, in no list but on call, approves
    and the write applies once; frank, in another group (and named after the right one), is refused, recording
    nothing."""
    before = TENANTS.write_count(site.db), TENANTS.snapshot(site.db, TENANTS.spare)
    async with await agent(site, "2026-07-28") as client:
        plan = await preview(client, TENANTS, TENANTS.spare)
        args = {"planId": plan["planId"], "idempotencyKey": new_key()}
        pending = await client.call_tool("reset_tenant", args)
        url = error_body(pending)["details"]["url"]
        frank = await signed_in(site, url, "frank")
        assert await frank.locator("button.approve").count() == 0
        assert "not as one of this gateway's approvers" in await frank.inner_text("main")
        token = await frank.get_attribute("input[name=csrf]", "value")
        forced = await frank.request.post(frank.url, form={"csrf": token, "decision": "approve"}, max_redirects=0)
        assert forced.headers["location"].endswith("?notice=not_an_approver")
        assert await decisions(site, plan["planId"]) == []
        assert (TENANTS.write_count(site.db), TENANTS.snapshot(site.db, TENANTS.spare)) == before
        erin = await signed_in(site, url, "erin")
        await erin.click("button.approve")
        await erin.wait_for_load_state()
        applied = await client.call_tool("reset_tenant", args)
    assert not applied.is_error, applied.content
    assert await decisions(site, plan["planId"]) == [("erin", "approve")]
    assert TENANTS.write_count(site.db) == before[0] + 1


async def test_the_audit_names_the_approver_by_issuer_and_subject_not_by_the_name_she_chose(site: Site) -> None:
    """mallory named herself "Bob Builder" at the identity provider. Her approval and the write it let through are
    recorded as her (issuer, subject), her verified email beside it, and ``audit list`` shows her so."""

    async def mallory_approves(url: str) -> None:
        page = await signed_in(site, url, "mallory")
        assert "Bob Builder" not in await page.inner_text("body")
        await page.click("button.approve")
        await page.wait_for_load_state()

    before = TENANTS.write_count(site.db)
    async with await agent(site, "2025-11-25", answers=opens_the_link(site, mallory_approves)) as client:
        plan = await preview(client, TENANTS, TENANTS.spare)
        result = await client.call_tool("reset_tenant", {"planId": plan["planId"], "idempotencyKey": new_key()})
    assert not result.is_error, result.content
    assert TENANTS.write_count(site.db) == before + 1
    mallory = {"issuer": site.provider.issuer, "subject": "mallory", "display": "mallory@example.test"}
    entries = {entry.outcome: entry.extra for entry in await audit_of(site, plan["planId"])}
    assert entries["approval"]["approver"] == mallory
    assert entries["applied"]["approvers"] == [mallory]
    listed = await anyio.run_process(
        [sys.executable, "-m", "gateway", "audit", "list", "--config", str(site.configs[0])], check=False
    )
    shown = listed.stdout.decode()
    assert listed.returncode == 0, listed.stderr
    assert f"mallory ({site.provider.issuer}) <mallory@example.test>" in shown
    assert "Bob Builder" not in shown


async def test_a_forged_post_without_the_csrf_token_is_refused(site: Site) -> None:
    async with await agent(site, "2025-11-25") as client:
        plan = await preview(client, TENANTS, TENANTS.spare)
        pending = await client.call_tool("reset_tenant", {"planId": plan["planId"], "idempotencyKey": new_key()})
    page = await signed_in(site, error_body(pending)["details"]["url"], "bob")
    forged = await page.request.post(page.url, form={"decision": "approve"}, max_redirects=0)
    assert forged.status == 403
    assert await decisions(site, plan["planId"]) == []


async def test_an_expired_approval_is_refused_and_writes_nothing(site: Site) -> None:
    before = TENANTS.write_count(site.db)
    async with await agent(site, "2025-11-25") as client:
        plan = await client.call_tool("preview_quick_reset", TENANTS.preview_args(TENANTS.spare))
        args = {"planId": (plan.structured_content or {})["planId"], "idempotencyKey": new_key()}
        pending = await client.call_tool("quick_reset", args)
        assert error_code(pending) == "approval_pending"
        await anyio.sleep(QUICK_TTL + 0.5)  # the plan's own lifetime, on the wall clock of two processes
        page = await signed_in(site, error_body(pending)["details"]["url"], "bob")
        assert await page.locator("button.approve").count() == 0
        assert "expired" in await page.inner_text("dd.state")
        assert await page.inner_text("h1") == "Expired: nothing was written"  # no longer "Approve this write?"
        retried = await client.call_tool("quick_reset", args)
    assert error_code(retried) == "plan_expired"
    assert TENANTS.write_count(site.db) == before


async def test_the_page_on_one_replica_and_the_retry_on_another(site: Site) -> None:
    before = TENANTS.write_count(site.db)
    async with await agent(site, "2026-07-28", replica=0) as first:
        plan = await preview(first, TENANTS, TENANTS.main)
        args = {"planId": plan["planId"], "idempotencyKey": new_key()}
        pending = await first.call_tool("reset_tenant", args)
    assert error_code(pending) == "approval_pending"
    page = await signed_in(site, site.page(1, approval_id_for(plan["planId"])), "bob")  # replica 1 serves the page
    await page.click("button.approve")
    async with await agent(site, "2026-07-28", replica=1) as second:  # and takes the retry
        applied = await second.call_tool("reset_tenant", args)
    async with await agent(site, "2025-11-25", replica=0) as third:
        replayed = await third.call_tool("reset_tenant", args)
    assert not applied.is_error, applied.content
    assert replayed.structured_content == {**(applied.structured_content or {}), "replayed": True}
    assert TENANTS.write_count(site.db) == before + 1


async def test_after_approve_the_page_says_the_write_ran_and_shows_the_requester_as_a_person(
    site: Site, era: str, tmp_path: Path
) -> None:
    """The agent cannot open links, so bob's Approve leaves the write for its retry: the page says so, then (looking
    again by itself) that it ran, with the version. Times show in bob's own zone beside UTC, the requester as a
    person (alice's issuer, subject and verified email, and the client she used), the tenant by its reported name."""
    before = TENANTS.write_count(site.db)
    async with await agent(site, era) as client:
        plan = await preview(client, TENANTS, TENANTS.other)
        args = {"planId": plan["planId"], "idempotencyKey": new_key()}
        pending = await client.call_tool("reset_tenant", args)
        url = error_body(pending)["details"]["url"]
        page = await signed_in(site, url, "bob", timezone_id="America/New_York", locale="en-US")
        facts = await page.inner_text("dl.facts")
        assert f"alice ({site.provider.issuer}) <alice@example.test> using agent-app" in facts
        assert '"tn_search02" named "Search QA"' in facts
        local = await page.locator("span.local").first.inner_text()  # the page's script, in bob's zone
        assert re.search(r"\b(EST|EDT|GMT-[45])\b", local), local
        await page.click("button.approve")
        await page.wait_for_load_state()
        assert await page.inner_text("h1") == "Approved: waiting for the agent to call again"
        await screenshot(page, "approval-approved.png", tmp_path)
        assert TENANTS.write_count(site.db) == before
        applied = await client.call_tool("reset_tenant", args)
    assert not applied.is_error, applied.content
    await page.wait_for_selector("h1:text-is('Approved and applied')", timeout=15_000)  # the page looked again
    version = (applied.structured_content or {})["version"]
    assert f"version {version} after it" in await page.inner_text("p.outcome")
    await screenshot(page, "approval-applied.png", tmp_path)
    assert TENANTS.write_count(site.db) == before + 1


async def test_the_list_keeps_what_was_decided_apart_and_shows_every_argument(site: Site, tmp_path: Path) -> None:
    """Two writes wait; one is rejected in a batch, which asks once more first. The list shows what waits, newest
    first, with each write's arguments and question; the Rejected filter shows the other."""
    before = TENANTS.write_count(site.db), TENANTS.snapshot(site.db, TENANTS.spare)
    ids = []
    async with await agent(site, "2026-07-28") as client:
        for variant in (0, 1):
            plan = await preview(client, TENANTS, TENANTS.spare, variant)
            pending = await client.call_tool("reset_tenant", {"planId": plan["planId"], "idempotencyKey": new_key()})
            assert error_code(pending) == "approval_pending"
            ids.append(approval_id_for(plan["planId"]))
    page = await signed_in(site, f"{site.urls[0]}/approvals", "carol", timezone_id="Asia/Tokyo", locale="en-GB")
    rows = page.locator("tbody tr")
    assert await rows.nth(0).locator("a").get_attribute("href") == f"/approvals/{ids[1]}"  # newest first
    listed = await page.inner_text("tbody")
    assert 'fixture="smoke"' in listed and 'fixture="empty"' in listed and "rows in tn_billing03" in listed
    await screenshot(page, "approval-list.png", tmp_path)
    await page.check(f"input[value='{ids[0]}']")
    await page.click("button.reject")
    await page.wait_for_load_state()
    assert await page.inner_text("h1") == "Reject this write?"
    await page.click("button.confirm")
    await page.wait_for_load_state()
    assert f"{ids[0]}: rejected" in await page.inner_text("ul.notice")
    await page.click("nav.filters >> text=Rejected")
    await page.wait_for_url("**show=rejected")
    shown = [await link.get_attribute("href") for link in await page.locator("tbody a").all()]
    assert f"/approvals/{ids[0]}" in shown and f"/approvals/{ids[1]}" not in shown
    assert (TENANTS.write_count(site.db), TENANTS.snapshot(site.db, TENANTS.spare)) == before


async def test_on_a_phone_the_list_and_the_write_show_the_question_and_the_state_without_scrolling_sideways(
    site: Site,
) -> None:
    async with await agent(site, "2026-07-28") as client:
        plan = await preview(client, TENANTS, TENANTS.spare, 1)
        pending = await client.call_tool("reset_tenant", {"planId": plan["planId"], "idempotencyKey": new_key()})
        assert error_code(pending) == "approval_pending"
    phone = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}
    page = await signed_in(site, f"{site.urls[0]}/approvals", "carol", **phone)
    for url in (f"{site.urls[0]}/approvals", error_body(pending)["details"]["url"]):
        await page.goto(url)
        assert await page.evaluate("document.documentElement.scrollWidth") <= 390, url
        for selector in ("td.question, p.question", "td.state, dd.state"):
            box = await page.locator(selector).first.bounding_box()
            assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390, (url, selector, box)
    assert "This write is destructive" in await page.inner_text("p.consequence")
