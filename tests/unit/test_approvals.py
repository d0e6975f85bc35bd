"""A url-mode write in both eras, in process: the approval page decides, never the client.

The gateway runs in this process with its backend server; the agent is a real SDK client in memory; approvers
use the page through its ASGI app (httpx, no network), signing in with approver tokens. The browser, the real
identity provider, four eyes and several replicas are in tests/system/test_approval_page.py.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, cast

import httpx
import mcp_types as types
import pytest

from gateway.approvals.lifecycle import WAIT_META, approval_id_for
from gateway.config import parse_config
from gateway.http.app import build_app
from gateway.runtime import Gateway
from tests.support.approvals import PageUser, approvals_section, url_mode
from tests.support.clients import (
    Clock,
    connect,
    error_body,
    error_code,
    new_key,
    preview,
    running_gateway,
    without_digest,
)
from tests.support.configs import config_data
from tests.support.profiles import Profile

pytestmark = pytest.mark.anyio

BOB = {"issuer": "static", "subject": "bob", "display": "Bob"}
PAGE = "https://127.0.0.1:8443"


@dataclass
class World:
    gw: Gateway
    db: Path
    clock: Clock
    app: Any


async def world_for(profile: Profile, tmp: Path, clock: Clock, **url: Any) -> AsyncIterator[World]:
    db = tmp / "backend.db"
    data = config_data(
        profile, db, *profile.seed_demo, state_dir=tmp / "state", tools=url_mode(profile.write_tool, **url)
    )
    data["approvals"] = approvals_section(PAGE)
    data["http"] = {"allowed_origins": [PAGE, "http://127.0.0.1:*"]}
    async with running_gateway(parse_config(data), clock, backend_in_process=True) as gw:
        yield World(gw, db, clock, build_app(gw))


@pytest.fixture(scope="module")
async def world(profile: Profile, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[World]:
    async for made in world_for(profile, tmp_path_factory.mktemp("approvals"), Clock(), timeout=2):
        yield made


def person(world: World) -> PageUser:
    """A fresh browser session on the page."""
    return PageUser(httpx.AsyncClient(transport=httpx.ASGITransport(app=world.app), base_url=PAGE), PAGE)


async def approve_as(world: World, who: str, approval_id: str, verdict: str = "approve") -> httpx.Response:
    user = person(world)
    async with user.http:
        assert (await user.sign_in(who)).status_code == 303
        return await user.decide(approval_id, verdict)


async def audit_of(gw: Gateway, key: str) -> list[Any]:
    return [entry async for entry in gw.store.audit_entries() if entry.idempotency_key == key]


async def test_a_client_that_cannot_open_urls_gets_approval_pending_and_writes_once_after_approval(
    world: World, profile: Profile, era: str
) -> None:
    before = profile.write_count(world.db)
    async with connect(world.gw, era) as client:  # no elicitation callback: declares no elicitation at all
        plan = await preview(client, profile)
        args = {"planId": plan["planId"], "idempotencyKey": new_key()}
        pending = await client.call_tool(profile.write_tool, args)
        assert error_code(pending) == "approval_pending"
        details = error_body(pending)["details"]
        approval_id = approval_id_for(plan["planId"])
        assert details["url"] == f"{PAGE}/approvals/{approval_id}" and details["expiresAt"] == plan["expiresAt"]
        assert profile.write_count(world.db) == before
        assert (await approve_as(world, "bob", approval_id)).status_code == 303
        applied = await client.call_tool(profile.write_tool, args)
        again = await client.call_tool(profile.write_tool, args)
    assert not applied.is_error, applied.content
    assert applied.structured_content is not None and applied.structured_content["replayed"] is False
    assert again.structured_content == {**applied.structured_content, "replayed": True}
    assert profile.write_count(world.db) == before + 1
    found = await audit_of(world.gw, args["idempotencyKey"])
    assert len({e.extra["factsDigest"] for e in found if "factsDigest" in e.extra}) == 1  # one digest, every event
    outcomes = [(e.outcome, e.code, without_digest(e.extra)) for e in found]
    assert outcomes == [
        ("refused", "approval_pending", {"mode": "url"}),  # a refusal once the mode was chosen names it
        ("applied", None, {"mode": "url", "approvers": [{"issuer": "static", "subject": "bob", "display": "Bob"}]}),
        ("returned", None, {"mode": "url", "approvers": [BOB], "answered": "result"}),  # what the caller heard
        ("replayed", None, {}),
    ]


async def test_a_client_that_opens_urls_is_sent_the_link_and_completes_after_approval(
    world: World, profile: Profile, era: str
) -> None:
    seen: list[types.ElicitRequestURLParams] = []

    async def user_opens_the_link(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestURLParams)
        seen.append(params)
        await approve_as(world, "carol", params.url.rsplit("/", 1)[1])
        return types.ElicitResult(action="accept")

    before = profile.write_count(world.db)
    async with connect(world.gw, era, user_opens_the_link) as client:
        plan = await preview(client, profile)
        asked = world.clock()
        result = await client.call_tool(profile.write_tool, {"planId": plan["planId"], "idempotencyKey": new_key()})
    assert not result.is_error, result.content
    assert [params.url for params in seen] == [f"{PAGE}/approvals/{approval_id_for(plan['planId'])}"]
    assert profile.write_count(world.db) == before + 1
    if era == "2025-11-25":  # a pushed link says how long the call waits (the 2026 wire drops an embedded _meta)
        wait = cast(dict[str, str], dict(seen[0].meta or {})[WAIT_META])
        assert wait["approvalId"] == approval_id_for(plan["planId"]) and wait["expiresAt"] == plan["expiresAt"]
        waits_until = datetime.fromisoformat(wait["waitsUntil"].replace("Z", "+00:00")).timestamp()
        assert asked - 1 <= waits_until <= asked + 3  # the prompt timeout (2 s) from when it asked


async def test_an_agent_that_answers_every_prompt_itself_cannot_write(world: World, profile: Profile, era: str) -> None:
    async def agent_says_yes(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"confirm": True, "confirmTarget": profile.main})

    before = profile.snapshot(world.db, profile.main), profile.write_count(world.db)
    async with connect(world.gw, era, agent_says_yes) as client:
        plan = await preview(client, profile)
        args = {"planId": plan["planId"], "idempotencyKey": new_key()}
        first = await client.call_tool(profile.write_tool, args)
        second = await client.call_tool(profile.write_tool, args)
    assert error_code(first) == error_code(second) == "approval_pending"
    assert (profile.snapshot(world.db, profile.main), profile.write_count(world.db)) == before


async def test_a_call_holding_the_link_waits_on_the_gateways_clock_until_the_prompt_timeout(
    world: World, profile: Profile
) -> None:
    async def user_opens_the_link(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept")

    async with connect(world.gw, "2025-11-25", user_opens_the_link) as client:
        plan = await preview(client, profile)
        started = world.clock.offset
        result = await client.call_tool(profile.write_tool, {"planId": plan["planId"], "idempotencyKey": new_key()})
    assert error_code(result) == "approval_pending"
    assert 1 < world.clock.offset - started <= 2  # the gateway's sleep moved its clock through the 2 s timeout


async def test_a_rejected_write_never_applies_and_its_plan_is_used_up(world: World, profile: Profile, era: str) -> None:
    before = profile.snapshot(world.db, profile.main), profile.write_count(world.db)
    async with connect(world.gw, era) as client:
        plan = await preview(client, profile)
        args = {"planId": plan["planId"], "idempotencyKey": new_key()}
        assert error_code(await client.call_tool(profile.write_tool, args)) == "approval_pending"
        assert (await approve_as(world, "bob", approval_id_for(plan["planId"]), "reject")).status_code == 303
        assert (await approve_as(world, "carol", approval_id_for(plan["planId"]))).status_code == 303  # too late
        refused = [
            await client.call_tool(profile.write_tool, {**args, "idempotencyKey": key})
            for key in (args["idempotencyKey"], new_key())
        ]
    assert [error_code(result) for result in refused] == ["not_confirmed", "not_confirmed"]
    assert (profile.snapshot(world.db, profile.main), profile.write_count(world.db)) == before


async def test_two_approvers_are_two_distinct_people(profile: Profile, tmp_path: Path) -> None:
    async for world in world_for(profile, tmp_path, Clock(), approvers=2, timeout=2):
        async with connect(world.gw, "2026-07-28") as client:
            plan = await preview(client, profile)
            args = {"planId": plan["planId"], "idempotencyKey": new_key()}
            approval_id = approval_id_for(plan["planId"])
            assert error_code(await client.call_tool(profile.write_tool, args)) == "approval_pending"
            await approve_as(world, "bob", approval_id)
            await approve_as(world, "bob", approval_id)  # approving twice is one approval
            assert error_code(await client.call_tool(profile.write_tool, args)) == "approval_pending"
            assert profile.write_count(world.db) == 0
            await approve_as(world, "carol", approval_id)
            applied = await client.call_tool(profile.write_tool, args)
        assert not applied.is_error, applied.content
        assert profile.write_count(world.db) == 1
        stored = await world.gw.store.get_approval(approval_id)
        assert stored is not None and [d.name for d in stored.decisions] == ["Bob", "Carol"]


async def test_a_decision_without_the_forms_csrf_token_or_from_another_origin_is_refused(
    world: World, profile: Profile
) -> None:
    async with connect(world.gw, "2025-11-25") as client:
        plan = await preview(client, profile)
        await client.call_tool(profile.write_tool, {"planId": plan["planId"], "idempotencyKey": new_key()})
    approval_id = approval_id_for(plan["planId"])
    user = person(world)
    async with user.http:
        await user.sign_in("bob")
        forged = [
            await user.post(f"/approvals/{approval_id}", {"decision": "approve"}),
            await user.post(f"/approvals/{approval_id}", {"decision": "approve", "csrf": "guessed"}),
        ]
        page = await user.http.get(f"/approvals/{approval_id}")
        token = page.text.split('name="csrf" value="')[1].split('"')[0]
        other_origin = await user.http.post(
            f"/approvals/{approval_id}",
            data={"decision": "approve", "csrf": token},
            headers={"Origin": "https://evil.example"},
        )
    assert [response.status_code for response in forged] == [403, 403]
    assert other_origin.status_code == 403
    stored = await world.gw.store.get_approval(approval_id)
    assert stored is not None and stored.decisions == ()


async def test_a_person_who_is_not_signed_in_is_sent_to_sign_in(world: World, profile: Profile) -> None:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=world.app), base_url=PAGE) as http:
        listing = await http.get("/approvals")
        post = await http.post("/approvals/ap_anything", data={"decision": "approve"}, headers={"Origin": PAGE})
        bad_token = await PageUser(http, PAGE).post("/approvals/login", {"csrf": "x", "token": "nope"})
    assert listing.status_code == 303 and listing.headers["location"].startswith("/approvals/login")
    assert post.status_code == 403
    assert bad_token.status_code == 403


async def test_an_expired_approval_takes_no_decision_and_writes_nothing(profile: Profile, tmp_path: Path) -> None:
    clock = Clock()
    async for world in world_for(profile, tmp_path, clock, timeout=2):
        async with connect(world.gw, "2026-07-28") as client:
            plan = await preview(client, profile)
            args = {"planId": plan["planId"], "idempotencyKey": new_key()}
            assert error_code(await client.call_tool(profile.write_tool, args)) == "approval_pending"
            clock.offset = 601
            decided = await approve_as(world, "bob", approval_id_for(plan["planId"]))
            assert decided.headers["location"].endswith("?notice=expired")
            assert error_code(await client.call_tool(profile.write_tool, args)) == "plan_expired"
        assert profile.write_count(world.db) == 0


async def test_every_page_forbids_framing_and_caching(world: World) -> None:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=world.app), base_url=PAGE) as http:
        for path in ("/approvals/login", "/approvals"):
            response = await http.get(path)
            assert "frame-ancestors 'none'" in response.headers["content-security-policy"]
            assert response.headers["cache-control"] == "no-store"
            assert response.headers["x-content-type-options"] == "nosniff"


async def test_one_caller_cannot_bury_the_page_past_its_cap_of_pending_approvals(
    profile: Profile, tmp_path: Path, era: str
) -> None:
    db = tmp_path / "backend.db"
    data = config_data(
        profile, db, *profile.seed_demo, state_dir=tmp_path / "state", tools=url_mode(profile.write_tool, timeout=2)
    )
    data["approvals"] = {**approvals_section(PAGE), "max_pending_per_caller": 2}
    async with running_gateway(parse_config(data), Clock(), backend_in_process=True) as gw:
        async with connect(gw, era) as client:  # declares no elicitation: each write answers at once
            codes = []
            for _ in range(3):
                plan = await preview(client, profile)
                answer = await client.call_tool(
                    profile.write_tool, {"planId": plan["planId"], "idempotencyKey": new_key()}
                )
                codes.append(error_code(answer))
        waiting = await gw.store.open_approvals(gw.clock())
    assert codes == ["approval_pending", "approval_pending", "too_many_approvals"]
    assert "2 writes waiting" in error_body(answer)["message"]
    assert len(waiting) == 2
    assert profile.write_count(db) == 0


async def test_a_declined_link_uses_nothing_up_and_the_write_still_waits_on_the_page(
    world: World, profile: Profile, era: str
) -> None:
    """What the README's table says: a client that will not open the link gets not_confirmed, and nothing is used
    up (unlike a form's decline): the same key is sent the link again, and applies once after approval."""

    async def will_not_open(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestURLParams)
        return types.ElicitResult(action="decline")

    before = profile.write_count(world.db)
    async with connect(world.gw, era, will_not_open) as client:
        plan = await preview(client, profile)
        args = {"planId": plan["planId"], "idempotencyKey": new_key()}
        declined = await client.call_tool(profile.write_tool, args)
    approval_id = approval_id_for(plan["planId"])
    assert error_code(declined) == "not_confirmed"
    assert error_body(declined)["details"]["url"] == f"{PAGE}/approvals/{approval_id}"
    assert profile.write_count(world.db) == before
    async with connect(world.gw, era) as client:
        assert error_code(await client.call_tool(profile.write_tool, args)) == "approval_pending"
        assert (await approve_as(world, "bob", approval_id)).status_code == 303
        applied = await client.call_tool(profile.write_tool, args)
    assert not applied.is_error, applied.content
    assert profile.write_count(world.db) == before + 1
