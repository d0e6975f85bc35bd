"""Approvers for tests: url-mode config, and a person using the approval page over HTTP (no browser).

The page is plain HTML forms; ``PageUser`` reads them the way a browser submits them (the session cookie, the
CSRF token from the form, the Origin header a browser sends). The browser tests drive the same page in Chromium.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

import httpx

from tests.support.configs import config_data
from tests.support.profiles import Profile

TOKENS = {"bob": "approver-token-bob-0123456789", "carol": "approver-token-carol-0123456789"}


def url_mode(profile_write_tool: str, *, approvers: int = 1, four_eyes: bool = False, timeout: float = 30) -> Any:
    """A ``tools`` change that puts a write tool into url mode."""

    def change(tools: dict[str, Any]) -> None:
        tools[profile_write_tool].update(
            confirm="url", approvers=approvers, four_eyes=four_eyes, prompt_timeout_seconds=timeout
        )

    return change


def approvals_section(public_url: str) -> dict[str, Any]:
    """An [approvals] table with approver tokens for bob and carol."""
    tokens = [
        {"sha256": hashlib.sha256(token.encode()).hexdigest(), "subject": person, "name": person.title()}
        for person, token in TOKENS.items()
    ]
    return {"public_url": public_url, "login": "tokens", "tokens": tokens}


def token_page_data(profile: Profile, tmp: Path, public_url: str, *, timeout: float = 2) -> dict[str, Any]:
    """The profile's config with its write tool in url mode, bob and carol's approver tokens, the page at
    ``public_url``, the backend's database, the SQLite store and the state under ``tmp`` (so gateways made from
    it share all three, and the secret key)."""
    data = config_data(
        profile,
        tmp / "backend.db",
        *profile.seed_demo,
        store=f"sqlite:{tmp}/gateway.db",
        state_dir=tmp / "state",
        tools=url_mode(profile.write_tool, timeout=timeout),
    )
    data["approvals"] = approvals_section(public_url)
    return data


class PageUser:
    """One person with one browser session on the approval page."""

    def __init__(self, http: httpx.AsyncClient, origin: str) -> None:
        self.http = http
        self.origin = origin

    async def sign_in(self, person: str) -> httpx.Response:
        """Sign in with the person's approver token."""
        form = await self.http.get("/approvals/login", params={"next": "/approvals"})
        return await self.post("/approvals/login", {"csrf": csrf_of(form.text), "token": TOKENS[person]})

    async def decide(self, approval_id: str, verdict: str) -> httpx.Response:
        """Open the approval and press Approve, or Reject and then "Yes, reject" on the question that follows."""
        page = await self.http.get(f"/approvals/{approval_id}")
        form = {"csrf": csrf_of(page.text), "decision": verdict}
        answer = await self.post(f"/approvals/{approval_id}", form)
        if verdict != "reject":
            return answer
        assert answer.status_code == 200 and 'name="confirmed" value="yes"' in answer.text, answer.text[:400]
        return await self.post(f"/approvals/{approval_id}", {**form, "confirmed": "yes"})

    async def post(self, path: str, data: dict[str, str]) -> httpx.Response:
        """A form POST as a browser sends it from this page."""
        return await self.http.post(path, data=data, headers={"Origin": self.origin})


def csrf_of(html: str) -> str:
    """The CSRF token in a page's form."""
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found is not None, html[:400]
    return found.group(1)


PAGE = "https://127.0.0.1:8443"
"""The approval page's origin in tests that reach it in process."""


async def approved_pending_write(gw: Any) -> tuple[str, dict[str, str]]:
    """A write of the TENANTS profile waiting for approval (its client cannot open links), approved by bob on the
    page (``gw``: a running gateway); its approval id and the write's arguments."""
    from gateway.approvals.lifecycle import approval_id_for
    from gateway.http.app import build_app
    from tests.support.clients import connect, error_code, new_key, preview
    from tests.support.profiles import TENANTS

    async with connect(gw, "2026-07-28") as client:
        plan = await preview(client, TENANTS, TENANTS.other)
        args = {"planId": plan["planId"], "idempotencyKey": new_key()}
        assert error_code(await client.call_tool(TENANTS.write_tool, args)) == "approval_pending"
    approval_id = approval_id_for(plan["planId"])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=build_app(gw)), base_url=PAGE) as http:
        user = PageUser(http, PAGE)
        assert (await user.sign_in("bob")).status_code == 303
        assert (await user.decide(approval_id, "approve")).status_code == 303
    return approval_id, args


def page_data(tmp: Path) -> dict[str, Any]:
    """The TENANTS profile's url-mode config with the page at PAGE: gateways made from it share the backend's
    database, the SQLite store and the secret key."""
    from tests.support.profiles import TENANTS

    data = token_page_data(TENANTS, tmp, PAGE)
    data["http"] = {"allowed_origins": [PAGE]}
    return data
