"""Approver sessions live in the store: every replica agrees on them, a sign-out or the operator revokes them
everywhere, each request checks them against the config as it is now, and a cookie is good only at the public URL
it was issued for. Approver-token attempts are rate limited per source (an IPv6 one by its /64), per token, and
all together.

Gateways run in this process over one SQLite store (replicas of one page, or a staging gateway sharing the secret
key); people use the page through its ASGI app. Real processes, a restart and a real client are in
tests/system/test_approver_sessions.py.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.approvals.lifecycle import approval_id_for
from gateway.cli import sessions as sessions_cli
from gateway.cli.main import main
from gateway.config import parse_config
from gateway.http.app import build_app
from gateway.http.page.session import SESSION_COOKIE
from gateway.runtime import Gateway
from tests.support.approvals import TOKENS, PageUser, csrf_of, token_page_data
from tests.support.clients import Clock, connect, error_code, new_key, preview, running_gateway
from tests.support.configs import write_toml
from tests.support.profiles import TENANTS

pytestmark = pytest.mark.anyio
PROD, STAGING = "https://gw.example.com", "https://staging.example.com"


@asynccontextmanager
async def gateways(
    tmp: Path, *urls: str, change: Callable[[dict[str, Any]], None] | None = None
) -> AsyncIterator[list[tuple[Gateway, Any]]]:
    """One in-process gateway per public URL (a URL twice: two replicas of one page), all on one SQLite store
    and one secret key; each with its page's ASGI app."""
    async with AsyncExitStack() as stack:
        made = []
        for url in urls:
            data = token_page_data(TENANTS, tmp, url)
            data["http"] = {
                "allowed_origins": [PROD, STAGING],
                "allowed_hosts": ["gw.example.com", "staging.example.com"],
            }
            if change is not None:
                change(data)
            gw = await stack.enter_async_context(running_gateway(parse_config(data), Clock(), backend_in_process=True))
            made.append((gw, build_app(gw)))
        yield made


def browser_at(app: Any, url: str, cookie: str | None = None, source: str = "127.0.0.1") -> PageUser:
    """A browser on the page at ``url`` (optionally holding a session cookie), from address ``source``."""
    transport = httpx.ASGITransport(app=app, client=(source, 40000))
    http = httpx.AsyncClient(transport=transport, base_url=url, cookies={SESSION_COOKIE: cookie} if cookie else None)
    return PageUser(http, url)


async def waiting_write(gw: Gateway) -> tuple[str, dict[str, str]]:
    """A write waiting for approval: its approval id and the call's arguments."""
    async with connect(gw, "2026-07-28") as client:
        plan = await preview(client, TENANTS, TENANTS.spare)
        args = {"planId": plan["planId"], "idempotencyKey": new_key()}
        assert error_code(await client.call_tool(TENANTS.write_tool, args)) == "approval_pending"
    return approval_id_for(plan["planId"]), args


async def signed_in(app: Any, url: str, who: str = "bob") -> tuple[str, str]:
    """Sign ``who`` in with their approver token: the session cookie and the CSRF token of their page."""
    user = browser_at(app, url)
    async with user.http:
        assert (await user.sign_in(who)).status_code == 303
        cookie = user.http.cookies[SESSION_COOKIE]
        return cookie, csrf_of((await user.http.get("/approvals")).text)


async def replayed(app: Any, url: str, cookie: str, csrf: str, approval_id: str) -> tuple[int, int]:
    """An old cookie presented again: the status of the list page, and of an Approve POSTed with it."""
    user = browser_at(app, url, cookie)
    async with user.http:
        listing = await user.http.get("/approvals")
        posted = await user.post(f"/approvals/{approval_id}", {"csrf": csrf, "decision": "approve"})
    return listing.status_code, posted.status_code


async def test_replicas_share_a_session_and_a_sign_out_on_one_ends_it_on_all(tmp_path: Path) -> None:
    async with gateways(tmp_path, PROD, PROD) as [(first, page_a), (_, page_b)]:
        approval_id, _ = await waiting_write(first)
        cookie, csrf = await signed_in(page_a, PROD)
        user = browser_at(page_b, PROD, cookie)  # the balancer sends the next request to the other replica
        async with user.http:
            assert (await user.http.get("/approvals")).status_code == 200
            assert (await user.post("/approvals/logout", {"csrf": csrf})).status_code == 200
        assert await replayed(page_a, PROD, cookie, csrf, approval_id) == (303, 403)
        stored = await first.store.get_approval(approval_id)
    assert stored is not None and stored.decisions == ()
    assert TENANTS.write_count(tmp_path / "backend.db") == 0


async def test_a_gateway_sharing_the_secret_key_at_another_address_refuses_the_cookie(tmp_path: Path) -> None:
    """Staging shares production's GATEWAY_SECRET_KEY (and here even its store): production's cookie signs no
    one in there."""
    async with gateways(tmp_path, PROD, STAGING) as [(prod, prod_page), (_, staging_page)]:
        approval_id, _ = await waiting_write(prod)
        cookie, csrf = await signed_in(prod_page, PROD)
        assert await replayed(staging_page, STAGING, cookie, csrf, approval_id) == (303, 403)
        stored = await prod.store.get_approval(approval_id)
    assert stored is not None and stored.decisions == ()


async def test_a_token_taken_out_of_the_config_ends_its_sessions_at_the_restart(tmp_path: Path) -> None:
    async with gateways(tmp_path, PROD) as [(gw, page)]:
        approval_id, args = await waiting_write(gw)
        cookie, csrf = await signed_in(page, PROD)

    def without_bob(data: dict[str, Any]) -> None:
        data["approvals"]["tokens"] = [t for t in data["approvals"]["tokens"] if t["subject"] != "bob"]

    async with gateways(tmp_path, PROD, change=without_bob) as [(gw, page)]:
        assert await replayed(page, PROD, cookie, csrf, approval_id) == (303, 403)
        async with connect(gw, "2025-11-25") as client:
            assert error_code(await client.call_tool(TENANTS.write_tool, args)) == "approval_pending"
        stored = await gw.store.get_approval(approval_id)
    assert stored is not None and stored.decisions == ()
    assert TENANTS.write_count(tmp_path / "backend.db") == 0


async def test_the_operator_lists_and_revokes_sessions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    async with gateways(tmp_path, PROD) as [(gw, page)]:
        approval_id, _ = await waiting_write(gw)
        bob, bob_csrf = await signed_in(page, PROD, "bob")
        carol, carol_csrf = await signed_in(page, PROD, "carol")
        listed = await gw.store.sessions(gw.clock())
        assert await sessions_cli.run(gw.config, [], None, as_json=False) == 0
        table = capsys.readouterr().out
        assert "bob (static) <Bob>" in table and "carol (static) <Carol>" in table
        assert all(session.session_id in table for session in listed)
        assert await sessions_cli.run(gw.config, [], "bob", as_json=False) == 0
        assert await replayed(page, PROD, bob, bob_csrf, approval_id) == (303, 403)
        carols = next(session.session_id for session in listed if "carol" in session.person)
        assert await sessions_cli.run(gw.config, [carols], None, as_json=False) == 0
        assert await replayed(page, PROD, carol, carol_csrf, approval_id) == (303, 403)
        assert await sessions_cli.run(gw.config, ["as_nobody"], None, as_json=False) == 1
        stored = await gw.store.get_approval(approval_id)
    assert stored is not None and stored.decisions == ()


async def api_attempt(app: Any, token: str, source: str) -> httpx.Response:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app, client=(source, 1)), base_url=PROD) as http:
        return await http.get("/approvals/api/open", headers={"Authorization": f"Bearer {token}"})


async def test_approver_token_guesses_are_limited_per_source_and_per_token(tmp_path: Path) -> None:
    def slow(data: dict[str, Any]) -> None:
        data["approvals"]["token_attempts_per_minute"] = 5

    async with gateways(tmp_path, PROD, change=slow) as [(_, page)]:
        from_one = [await api_attempt(page, f"guess-{n}", "10.0.0.1") for n in range(6)]
        assert [r.status_code for r in from_one] == [401] * 5 + [429]
        refused = from_one[-1]
        assert refused.json()["code"] == "rate_limited" and int(refused.headers["retry-after"]) >= 1
        assert (await api_attempt(page, TOKENS["bob"], "10.0.0.1")).status_code == 429  # even the right token
        assert (await api_attempt(page, TOKENS["bob"], "10.0.0.2")).status_code == 200  # another source
        one_token = [await api_attempt(page, "one-stolen-guess", f"10.0.1.{n}") for n in range(6)]
        assert [r.status_code for r in one_token] == [401] * 5 + [429]
        user = browser_at(page, PROD, source="10.0.0.1")
        async with user.http:
            form = await user.http.get("/approvals/login")
            signed = await user.post("/approvals/login", {"csrf": csrf_of(form.text), "token": TOKENS["carol"]})
        assert signed.status_code == 429 and "Too many" in signed.text


async def test_guesses_from_one_ipv6_network_share_a_bucket(tmp_path: Path) -> None:
    def slow(data: dict[str, Any]) -> None:
        data["approvals"]["token_attempts_per_minute"] = 5

    async with gateways(tmp_path, PROD, change=slow) as [(_, page)]:
        spread = [await api_attempt(page, f"guess-{n}", f"2001:db8:1:2:{n:x}::1") for n in range(6)]
        elsewhere = await api_attempt(page, TOKENS["bob"], "2001:db8:1:3::1")
    assert [r.status_code for r in spread] == [401] * 5 + [429]
    assert elsewhere.status_code == 200
    assert TENANTS.write_count(tmp_path / "backend.db") == 0


async def test_guesses_from_everywhere_meet_one_ceiling(tmp_path: Path) -> None:
    def ceiling(data: dict[str, Any]) -> None:
        data["approvals"]["token_attempts_per_minute_total"] = 5

    async with gateways(tmp_path, PROD, change=ceiling) as [(gw, page)]:
        approval_id, _ = await waiting_write(gw)
        spread = [await api_attempt(page, f"guess-{n}", f"198.51.100.{n}") for n in range(6)]
        right = await api_attempt(page, TOKENS["bob"], "203.0.113.1")  # not even compared past the ceiling
        assert right.json()["code"] == "rate_limited"
        gw.clock.offset += 60  # type: ignore[attr-defined]  # tests.support.clients.Clock
        later = await api_attempt(page, TOKENS["bob"], "203.0.113.1")
        stored = await gw.store.get_approval(approval_id)
    assert [r.status_code for r in spread] == [401] * 5 + [429]
    assert (right.status_code, later.status_code) == (429, 200)
    assert stored is not None and stored.decisions == ()
    assert TENANTS.write_count(tmp_path / "backend.db") == 0


def test_the_sessions_subcommand_reads_the_configs_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write_toml(token_page_data(TENANTS, tmp_path, PROD), tmp_path / "gateway.toml")
    assert main(["approvals", "sessions", "--config", str(config)]) == 0
    assert "nobody is signed in" in capsys.readouterr().out
    assert main(["approvals", "sessions", "--config", str(config), "--person", "bob"]) == 1
    with pytest.raises(SystemExit):
        main(["approvals", "list", "--revoke", "as_x"])  # --revoke belongs to sessions
