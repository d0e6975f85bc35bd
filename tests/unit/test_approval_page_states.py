"""The page a person would want, in process: after Approve it says whether the write ran (waiting for the agent's
retry, applied, or refused with its code); the list shows applied, rejected and expired apart from what waits;
Reject asks once more; an expired write no longer asks "Approve this write?"; rows show every argument and the
question; the target's reported name is shown escaped. The same states in Chromium, with the screenshots the docs
show, are in tests/system/test_approval_page.py."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import mcp_types as types
import pytest

from gateway.approvals.lifecycle import approval_id_for
from tests.support.approvals import PageUser, csrf_of
from tests.support.clients import Clock, connect, error_code, new_key, preview
from tests.support.profiles import TENANTS
from tests.unit.test_approvals import PAGE, World, world_for

pytestmark = pytest.mark.anyio


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[World]:
    async for made in world_for(TENANTS, tmp_path, Clock(), timeout=2):
        yield made


async def pending(world: World, target: str = TENANTS.main) -> tuple[str, dict[str, str]]:
    """A write waiting for approval (from an agent that cannot open links): its approval id and arguments."""
    async with connect(world.gw, "2026-07-28") as client:
        plan = await preview(client, TENANTS, target)
        args = {"planId": plan["planId"], "idempotencyKey": new_key()}
        assert error_code(await client.call_tool(TENANTS.write_tool, args)) == "approval_pending"
    return approval_id_for(plan["planId"]), args


@asynccontextmanager
async def signed_in(world: World, who: str = "bob") -> AsyncIterator[PageUser]:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=world.app), base_url=PAGE) as http:
        user = PageUser(http, PAGE)
        assert (await user.sign_in(who)).status_code == 303
        yield user


async def retried(world: World, args: dict[str, str], era: str) -> str | None:
    """The agent's retry: the error code, or None when it applied."""
    async with connect(world.gw, era) as client:
        answer = await client.call_tool(TENANTS.write_tool, args)
    return None if not answer.is_error else error_code(answer)


def heading(html: str) -> str:
    return html.split("<h1", 1)[1].split(">", 1)[1].split("</h1>", 1)[0]


async def test_after_approve_the_page_says_whether_the_write_ran(world: World, era: str) -> None:
    approval_id, args = await pending(world)
    async with signed_in(world) as user:
        approved = await user.decide(approval_id, "approve")
        page = await user.http.get(approved.headers["location"])
        waiting = await user.http.get(f"/approvals/{approval_id}")
        assert "<dd>Reset a tenant <code>reset_tenant</code></dd>" in waiting.text  # the tool's title
        assert "This write is destructive: it deletes or replaces what the target holds, and it cannot be undone." in (
            waiting.text
        )
        # No call of the agent waits on it (its client cannot open links): it runs at the agent's retry.
        assert heading(page.text) == "Approved: waiting for the agent to call again"
        assert '<dd class="state approved">approved: waiting for the agent&#39;s retry</dd>' in page.text
        assert 'http-equiv="refresh"' in page.text  # it looks again by itself until the write ran
        assert await retried(world, args, era) is None
        page = await user.http.get(f"/approvals/{approval_id}")
        version = TENANTS.version(world.db, TENANTS.main)
        assert heading(page.text) == "Approved and applied"
        assert '<dd class="state applied">applied</dd>' in page.text  # the facts say what the heading says
        assert f"version {version} after it" in page.text and 'http-equiv="refresh"' not in page.text
        listed = await user.http.get("/approvals", params={"show": "applied"})
        waiting = await user.http.get("/approvals")
    assert approval_id in listed.text and approval_id not in waiting.text


async def test_an_approved_write_the_gateway_then_refuses_says_so_with_the_code(world: World, era: str) -> None:
    approval_id, args = await pending(world, TENANTS.other)
    async with signed_in(world) as user:
        await user.decide(approval_id, "approve")
        TENANTS.bump(world.db, TENANTS.other)  # the tenant moved on after the approval, before the retry
        before = TENANTS.write_count(world.db)
        assert await retried(world, args, era) == "plan_stale"
        page = await user.http.get(f"/approvals/{approval_id}")
        listed = await user.http.get("/approvals", params={"show": "not_applied"})
    assert heading(page.text) == "Approved, but not applied" and "(plan_stale)" in page.text
    assert approval_id in listed.text
    assert TENANTS.write_count(world.db) == before


async def test_reject_asks_once_more_and_only_the_second_answer_rejects(world: World) -> None:
    approval_id, args = await pending(world, TENANTS.spare)
    async with signed_in(world) as user:
        page = await user.http.get(f"/approvals/{approval_id}")
        first = await user.post(f"/approvals/{approval_id}", {"csrf": csrf_of(page.text), "decision": "reject"})
        assert first.status_code == 200 and heading(first.text) == "Reject this write?"
        assert "Yes, reject" in first.text and f"rows in {TENANTS.spare} and load fixture" in first.text
        stored = await world.gw.store.get_approval(approval_id)
        assert stored is not None and stored.decisions == ()  # asked, not yet rejected
        listing = await user.http.get("/approvals")
        batch = {"csrf": csrf_of(listing.text), "decision": "reject", "approval": approval_id}
        again = await user.post("/approvals", batch)
        assert again.status_code == 200 and heading(again.text) == "Reject this write?"
        stored = await world.gw.store.get_approval(approval_id)
        assert stored is not None and stored.decisions == ()
        done = await user.post("/approvals", {**batch, "confirmed": "yes"})
        rejected = await user.http.get("/approvals", params={"show": "rejected"})
    assert f"<code>{approval_id}</code>: rejected" in done.text
    assert approval_id in rejected.text
    assert await retried(world, args, "2025-11-25") == "not_confirmed"


async def test_an_expired_write_no_longer_asks_to_be_approved(tmp_path: Path) -> None:
    clock = Clock()
    async for world in world_for(TENANTS, tmp_path, clock, timeout=2):
        approval_id, _ = await pending(world)
        clock.offset = 601
        async with signed_in(world) as user:
            page = await user.http.get(f"/approvals/{approval_id}")
            expired = await user.http.get("/approvals", params={"show": "expired"})
            waiting = await user.http.get("/approvals")
        assert "Approve this write?" not in page.text and heading(page.text) == "Expired: nothing was written"
        assert 'class="approve"' not in page.text
        assert approval_id in expired.text and approval_id not in waiting.text


async def test_rows_show_every_argument_the_question_and_the_targets_reported_name_escaped(world: World) -> None:
    with sqlite3.connect(world.db) as db:
        db.execute("UPDATE tenants SET name = ? WHERE id = ?", ("Billing <b>\u202eQA\x1b[2K", TENANTS.spare))
    approval_id, _ = await pending(world, TENANTS.spare)
    async with signed_in(world) as user:
        listing = await user.http.get("/approvals")
        page = await user.http.get(f"/approvals/{approval_id}")
    for html in (listing.text, page.text):
        assert "fixture=" in html or "<dt>fixture</dt>" in html
        assert "&#34;Billing &lt;b&gt;\\u202eQA\\u001b[2K&#34;" in html  # quoted, escaped, nothing invisible
        assert "<b>" not in html and "\u202e" not in html and "\x1b" not in html
        assert f"rows in {TENANTS.spare} and load fixture" in html  # the question
    assert "fixture=&#34;empty&#34;" in listing.text


async def test_an_approval_a_call_waits_on_says_running_now_until_the_write_ran(world: World, era: str) -> None:
    """A client that opens the link keeps its call waiting: the page says the write runs now, not that it waits
    for a retry; once it ran, applied."""
    pages: list[str] = []

    async def person_approves_and_looks(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestURLParams)
        approval_id = params.url.rsplit("/", 1)[1]
        async with signed_in(world) as user:
            approved = await user.decide(approval_id, "approve")
            pages.append((await user.http.get(approved.headers["location"])).text)
        return types.ElicitResult(action="accept")

    async with connect(world.gw, era, person_approves_and_looks) as client:
        plan = await preview(client, TENANTS, TENANTS.other)
        result = await client.call_tool(TENANTS.write_tool, {"planId": plan["planId"], "idempotencyKey": new_key()})
    assert not result.is_error, result.content
    assert [heading(page) for page in pages] == ["Approved: running now"]
    assert '<dd class="state running">approved: running now</dd>' in pages[0]
    async with signed_in(world) as user:
        after = await user.http.get(f"/approvals/{approval_id_for(plan['planId'])}")
    assert heading(after.text) == "Approved and applied"
