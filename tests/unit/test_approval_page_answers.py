"""Every answer of the approval page keeps the page's security headers: a store failure on any route, and every
JSON answer of the approvers' API (``no-store``: it lists who asked for what)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, NoReturn, cast

import httpx
import pytest

from gateway.approvals.lifecycle import approval_id_for
from gateway.http.page.routes import ApprovalPage
from gateway.stores import Store, StoreUnavailable
from tests.support.approvals import TOKENS, PageUser, csrf_of
from tests.support.clients import Clock, connect, error_code, new_key, preview
from tests.support.profiles import Profile
from tests.unit.test_approvals import PAGE, World, world_for

pytestmark = pytest.mark.anyio
BOB = {"Authorization": f"Bearer {TOKENS['bob']}"}


class StoreDown:
    """The gateway's store with its database gone: every operation it has raises StoreUnavailable."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        getattr(self.inner, name)  # an operation the store does not have is still an AttributeError

        async def unavailable(*args: Any, **kwargs: Any) -> NoReturn:
            raise StoreUnavailable(f"{name}: the database cannot be reached")

        return unavailable


@pytest.fixture
async def world(profile: Profile, tmp_path: Path) -> AsyncIterator[World]:
    async for made in world_for(profile, tmp_path, Clock(), timeout=2):
        yield made


def assert_page_headers(response: httpx.Response, *, cached: bool = False) -> None:
    where = f"{response.request.method} {response.request.url.path} ({response.status_code})"
    assert "frame-ancestors 'none'" in response.headers.get("content-security-policy", ""), where
    assert response.headers.get("x-content-type-options") == "nosniff", where
    assert response.headers.get("x-frame-options") == "DENY", where
    assert cached or response.headers.get("cache-control") == "no-store", where


async def test_every_page_route_answers_a_store_failure_with_the_pages_headers(world: World) -> None:
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app=world.app), base_url=PAGE)
    user = PageUser(http, PAGE)
    async with http:
        assert (await user.sign_in("bob")).status_code == 303
        csrf = csrf_of((await http.get("/approvals")).text)
        world.gw.store = cast(Store, StoreDown(world.gw.store))
        answers = {
            ("GET", "/approvals"): await http.get("/approvals"),
            ("POST", "/approvals"): await user.post(
                "/approvals", {"csrf": csrf, "decision": "approve", "approval": "ap_x"}
            ),
            ("GET", "/approvals/api/open"): await http.get("/approvals/api/open", headers=BOB),
            ("POST", "/approvals/api/{approval_id}"): await http.post(
                "/approvals/api/ap_x", json={"decision": "approve"}, headers=BOB
            ),
            ("GET", "/approvals/{approval_id}"): await http.get("/approvals/ap_x"),
            ("POST", "/approvals/{approval_id}"): await user.post(
                "/approvals/ap_x", {"csrf": csrf, "decision": "approve"}
            ),
            ("GET", "/approvals/page.css"): await http.get("/approvals/page.css"),
            ("GET", "/approvals/page.js"): await http.get("/approvals/page.js"),
            ("GET", "/approvals/passkey.js"): await http.get("/approvals/passkey.js"),
            ("GET", "/approvals/passkeys"): await http.get("/approvals/passkeys"),
            ("POST", "/approvals/passkeys"): await user.post("/approvals/passkeys", {"csrf": csrf}),
            ("GET", "/approvals/login"): await http.get("/approvals/login"),
            ("POST", "/approvals/login"): await user.sign_in("carol"),
            ("GET", "/approvals/callback"): await http.get("/approvals/callback"),
            ("POST", "/approvals/logout"): await user.post("/approvals/logout", {"csrf": csrf}),
        }
    routes = {(method, route.path) for route in ApprovalPage(world.gw).routes() for method in route.methods or ()}
    assert set(answers) == routes - {(method, path) for method, path in routes if method == "HEAD"}
    for (method, path), response in answers.items():
        static = path in {"/approvals/page.css", "/approvals/page.js", "/approvals/passkey.js"}
        assert_page_headers(response, cached=static)
        if not static and path not in {"/approvals/login", "/approvals/callback", "/approvals/logout"}:
            assert response.status_code == 503, (method, path, response.status_code)
    assert answers["GET", "/approvals/api/open"].json() == {
        "error": "the gateway's store cannot be reached right now; try again"
    }
    assert "cannot be reached" in answers["GET", "/approvals"].text


async def test_every_json_answer_of_the_api_is_not_to_be_cached(world: World, profile: Profile) -> None:
    async with connect(world.gw, "2026-07-28") as client:
        plan = await preview(client, profile)
        args = {"planId": plan["planId"], "idempotencyKey": new_key()}
        assert error_code(await client.call_tool(profile.write_tool, args)) == "approval_pending"
    approval = f"/approvals/api/{approval_id_for(plan['planId'])}"
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=world.app), base_url=PAGE) as http:
        answers = [
            await http.get("/approvals/api/open"),
            await http.get("/approvals/api/open", headers=BOB),
            await http.post(approval, json={"verdict": "yes"}, headers=BOB),
            await http.post("/approvals/api/ap_none", json={"decision": "approve"}, headers=BOB),
            await http.post(approval, json={"decision": "approve"}, headers=BOB),
            await http.post(approval, json={"decision": "reject"}, headers=BOB),
        ]
    assert [response.status_code for response in answers] == [401, 200, 400, 404, 200, 409]
    for response in answers:
        assert response.headers["content-type"] == "application/json"
        assert_page_headers(response)
