"""Refusals whose way out is an authorization carry a structured denial in the shape of SEP-2643 (draft), in the
isError result's ``_meta``, beside the unchanged code and message: what would let the call through (the approval
page and who must approve there, a form the client can show, a scope), or that nothing can (a rule's deny, a
rejection). In both eras, with a real SDK client in memory; nothing is written on any of these paths."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import mcp_types as types
import pytest

from gateway.approvals.lifecycle import approval_id_for
from gateway.config import parse_config
from gateway.errors import AUTHORIZATION_META, ToolError
from gateway.http.app import build_app
from gateway.identity.caller import authorize
from gateway.runtime import Gateway
from tests.support.approvals import PageUser, approvals_section, url_mode
from tests.support.clients import Answers, Clock, connect, error_body, error_code, new_key, preview, running_gateway
from tests.support.configs import config_data
from tests.support.profiles import Profile

pytestmark = pytest.mark.anyio
PAGE = "https://127.0.0.1:8443"


def envelope(result: types.CallToolResult) -> dict[str, Any]:
    """The structured denial a refusal carries (and the refusal itself is as it always was: no structuredContent)."""
    assert result.is_error and result.structured_content is None
    meta = result.meta or {}
    found: dict[str, Any] = meta[AUTHORIZATION_META]
    assert found["reason"] == "insufficient_authorization"
    return found


def hint(found: dict[str, Any], kind: str) -> dict[str, Any]:
    matched: list[dict[str, Any]] = [each for each in found.get("remediationHints", []) if each["type"] == kind]
    assert len(matched) == 1, found
    return matched[0]


@pytest.fixture
async def url_world(profile: Profile, tmp_path: Path) -> AsyncIterator[tuple[Gateway, Path]]:
    db = tmp_path / "backend.db"
    data = config_data(
        profile, db, *profile.seed_demo, state_dir=tmp_path / "state", tools=url_mode(profile.write_tool, approvers=2)
    )
    data["approvals"] = approvals_section(PAGE)
    data["http"] = {"allowed_origins": [PAGE]}
    async with running_gateway(parse_config(data), Clock(), backend_in_process=True) as gw:
        yield gw, db


async def decide(gw: Gateway, approval_id: str, verdict: str) -> None:
    app = build_app(gw)
    user = PageUser(httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=PAGE), PAGE)
    async with user.http:
        assert (await user.sign_in("bob")).status_code == 303
        assert (await user.decide(approval_id, verdict)).status_code == 303


async def test_a_write_waiting_on_the_page_names_the_page_who_must_approve_and_in_2026_a_task(
    url_world: tuple[Gateway, Path], profile: Profile, era: str
) -> None:
    gw, db = url_world
    before = profile.write_count(db)
    async with connect(gw, era) as client:  # no elicitation at all: approval_pending with the link
        plan = await preview(client, profile)
        args = {"planId": plan["planId"], "idempotencyKey": new_key()}
        pending = await client.call_tool(profile.write_tool, args)
        await decide(gw, approval_id_for(plan["planId"]), "approve")  # one of the two approvers
        still = await client.call_tool(profile.write_tool, args)
    approval_id = approval_id_for(plan["planId"])
    url = f"{PAGE}/approvals/{approval_id}"
    assert error_code(pending) == error_code(still) == "approval_pending"
    found, later = envelope(pending), envelope(still)
    assert found["remediation"] == "available" and found["authorizationContextId"] == approval_id
    assert hint(found, "url") == {"type": "url", "url": url}
    people = hint(found, "mcp-safety-gateway/approval")
    assert people == {
        "type": "mcp-safety-gateway/approval",
        "approvalId": approval_id,
        "approversNeeded": 2,
        "approvedSoFar": 0,
        "callerMayApprove": True,
        "expiresAt": plan["expiresAt"],
    }
    assert hint(later, "mcp-safety-gateway/approval")["approvedSoFar"] == 1
    tasks = [each for each in found["remediationHints"] if each["type"] == "task"]
    assert tasks == ([{"type": "task"}] if era == "2026-07-28" else [])  # tasks exist on the 2026 wire only
    details = error_body(still)["details"]
    assert (details["approversNeeded"], details["approvedSoFar"], details["fourEyes"]) == (2, 1, False)
    assert profile.write_count(db) == before


async def test_a_rejected_write_can_be_let_through_by_nothing(
    url_world: tuple[Gateway, Path], profile: Profile, era: str
) -> None:
    gw, db = url_world
    before = profile.write_count(db), profile.snapshot(db, profile.main)
    async with connect(gw, era) as client:
        plan = await preview(client, profile)
        args = {"planId": plan["planId"], "idempotencyKey": new_key()}
        await client.call_tool(profile.write_tool, args)
        await decide(gw, approval_id_for(plan["planId"]), "reject")
        rejected = await client.call_tool(profile.write_tool, args)
    assert error_code(rejected) == "not_confirmed"
    assert envelope(rejected) == {
        "reason": "insufficient_authorization",
        "remediation": "unavailable",
        "authorizationContextId": approval_id_for(plan["planId"]),
    }
    assert (profile.write_count(db), profile.snapshot(db, profile.main)) == before


async def test_a_declined_link_still_names_the_approval_that_lets_the_write_through(
    url_world: tuple[Gateway, Path], profile: Profile, era: str
) -> None:
    gw, db = url_world
    before = profile.write_count(db)
    async with connect(gw, era, Answers("decline")) as client:  # declares url elicitation, declines the link
        plan = await preview(client, profile)
        declined = await client.call_tool(profile.write_tool, {"planId": plan["planId"], "idempotencyKey": new_key()})
    assert error_code(declined) == "not_confirmed"
    found = envelope(declined)
    assert found["remediation"] == "available"
    assert hint(found, "url")["url"] == f"{PAGE}/approvals/{approval_id_for(plan['planId'])}"
    assert profile.write_count(db) == before


async def test_a_client_that_cannot_show_a_form_is_told_a_form_would_let_the_write_through(
    gw: Gateway, profile: Profile, era: str, db: Path
) -> None:
    before = profile.write_count(db)
    async with connect(gw, era) as client:  # no elicitation capability
        plan = await preview(client, profile)
        refused = await client.call_tool(profile.write_tool, {"planId": plan["planId"], "idempotencyKey": new_key()})
    assert error_code(refused) == "confirmation_unavailable"
    found = envelope(refused)
    assert found["remediation"] == "available"
    assert hint(found, "mcp-safety-gateway/confirmation") == {
        "type": "mcp-safety-gateway/confirmation",
        "capability": "elicitation.form",
        "modes": ["form"],
    }
    assert error_body(refused)["details"] == {"needs": "elicitation.form"}
    assert profile.write_count(db) == before


async def test_a_spent_budget_is_a_denial_nothing_lets_through(profile: Profile, tmp_path: Path, era: str) -> None:
    db = tmp_path / "backend.db"

    def budget(tools: dict[str, Any]) -> None:
        tools[profile.write_tool]["approval"] = [
            {"name": "one_an_hour", "when": "writes.caller.hour >= 1", "mode": "deny"}
        ]

    data = config_data(profile, db, *profile.seed_demo, state_dir=tmp_path / "state", tools=budget)
    async with (
        running_gateway(parse_config(data), Clock(), backend_in_process=True) as gw,
        connect(gw, era) as client,
    ):
        await preview(client, profile)  # the hour's one plan
        denied = await client.call_tool(profile.preview_tool, profile.preview_args())
    assert error_code(denied) == "denied" and error_body(denied)["details"] == {"rule": "one_an_hour"}
    assert envelope(denied) == {"reason": "insufficient_authorization", "remediation": "unavailable"}
    assert profile.write_count(db) == 0


def test_a_missing_scope_names_the_scope_a_replacement_token_must_hold(profile: Profile, tmp_path: Path) -> None:
    data = config_data(profile, tmp_path / "backend.db", state_dir=tmp_path / "state")
    token = {"sha256": "0" * 64, "client_id": "reader", "scopes": ["tenants:read"]}
    data["auth"] = {"verifier": "static", "resource_url": "https://gw.example/mcp", "tokens": [token]}
    data["tools"][profile.write_tool]["hidden_when_unauthorized"] = False
    config = parse_config(data)
    with pytest.raises(ToolError) as refused:
        authorize(config, profile.write_tool, {"tenants:read"})
    scope = config.scopes_of(profile.write_tool)
    assert refused.value.body()["details"] == {"missingScopes": scope}  # as it always was
    assert refused.value.authorization == {
        "reason": "insufficient_authorization",
        "remediation": "available",
        "credentialDisposition": "replacement",
        "remediationHints": [
            {
                "type": "oauth_authorization_details",
                "authorization_details": [
                    {
                        "type": "mcp-safety-gateway/tool",
                        "identifier": profile.write_tool,
                        "actions": ["tools/call"],
                        "privileges": scope,
                        "locations": ["https://gw.example/mcp"],
                    }
                ],
            }
        ],
    }
