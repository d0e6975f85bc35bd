"""Pass-through writes are first-class writes: they count in the write budgets beside planned writes, carry
approval rules (deny, fail closed) and can need people on the approval page, in both protocol eras.

One gateway over both demo backends: ``reset_tenant`` (a planned write on the tenants backend) and
``describe_flag`` (the flags backend's own ``set_flag_description``, passed through) share one caller budget.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.approvals.lifecycle import approval_id_for
from gateway.config import parse_config
from gateway.http.app import build_app
from gateway.runtime import Gateway
from gateway.write.passthrough import implied_plan_id
from tests.support.approvals import PageUser, approvals_section
from tests.support.clients import (
    Answers,
    Clock,
    connect,
    error_body,
    error_code,
    new_key,
    preview,
    running_gateway,
    without_digest,
)
from tests.support.configs import together_data
from tests.support.profiles import FLAGS, TENANTS

pytestmark = pytest.mark.anyio
PAGE = "https://127.0.0.1:8443"
BUDGETED = {"approval": [{"name": "two_an_hour", "when": "writes.caller.hour >= 2", "mode": "deny"}]}
URL = {"confirm": "url", "prompt_timeout_seconds": 8}
BOB = {"issuer": "static", "subject": "bob", "display": "Bob"}


@dataclass
class World:
    gw: Gateway
    tenants_db: Path
    flags_db: Path
    app: Any


@pytest.fixture
async def world(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[World]:
    """The two-backend gateway, with the test's changes (``request.param``) to ``describe_flag`` and
    ``reset_tenant``."""
    describe, reset = request.param
    tenants_db = tmp_path / "tenants.db"
    data = together_data(TENANTS, tenants_db, *TENANTS.seed_demo, state_dir=tmp_path / "state")
    for tool, change in (("describe_flag", describe), ("reset_tenant", reset)):
        data["tools"][tool] = {**data["tools"][tool], **change}
    data["approvals"] = approvals_section(PAGE)
    data["http"] = {"allowed_origins": [PAGE, "http://127.0.0.1:*"]}
    async with running_gateway(parse_config(data), Clock(), backend_in_process=True) as gw:
        yield World(gw, tenants_db, tenants_db.with_name(f"{FLAGS.name}.db"), build_app(gw))


def changes(describe: dict[str, Any], reset: dict[str, Any] | None = None) -> pytest.MarkDecorator:
    """The world of a test whose tools are changed so."""
    return pytest.mark.parametrize("world", [(describe, reset or {})], indirect=True, ids=[""])


def description(db: Path, key: str) -> str:
    with sqlite3.connect(db) as conn:
        return str(conn.execute("SELECT description FROM flags WHERE key = ?", (key,)).fetchone()[0])


def describe_args(text: str, key: str | None = None) -> dict[str, Any]:
    return {"key": FLAGS.main, "description": text, "idempotencyKey": key or new_key()}


async def approve_as(world: World, who: str, approval_id: str, verdict: str = "approve") -> httpx.Response:
    user = PageUser(httpx.AsyncClient(transport=httpx.ASGITransport(app=world.app), base_url=PAGE), PAGE)
    async with user.http:
        assert (await user.sign_in(who)).status_code == 303
        return await user.decide(approval_id, verdict)


async def audit_of(gw: Gateway, key: str) -> list[tuple[str, str | None, dict[str, Any]]]:
    return [
        (e.outcome, e.code, without_digest(e.extra)) async for e in gw.store.audit_entries() if e.idempotency_key == key
    ]


@changes(URL)
async def test_a_url_mode_passthrough_write_waits_for_a_person_and_writes_once(world: World, era: str) -> None:
    before = description(world.flags_db, FLAGS.main), FLAGS.write_count(world.flags_db)
    args = describe_args("approved by a person")
    async with connect(world.gw, era) as client:  # declares no elicitation: it is handed the link
        pending = await client.call_tool("describe_flag", args)
        again = await client.call_tool("describe_flag", args)
        assert (description(world.flags_db, FLAGS.main), FLAGS.write_count(world.flags_db)) == before
        approval_id = approval_id_for(implied_plan_id("local", "describe_flag", args["idempotencyKey"], args_of(args)))
        assert error_body(pending)["details"]["url"] == f"{PAGE}/approvals/{approval_id}"
        assert (await approve_as(world, "bob", approval_id)).status_code == 303
        applied = await client.call_tool("describe_flag", args)
        replayed = await client.call_tool("describe_flag", args)
    assert error_code(pending) == error_code(again) == "approval_pending"
    assert not applied.is_error, applied.content
    assert replayed.structured_content == {**(applied.structured_content or {}), "replayed": True}
    assert description(world.flags_db, FLAGS.main) == "approved by a person"
    assert FLAGS.write_count(world.flags_db) == before[1] + 1
    assert await audit_of(world.gw, args["idempotencyKey"]) == [
        ("refused", "approval_pending", {"mode": "url"}),
        ("refused", "approval_pending", {"mode": "url"}),
        ("applied", None, {"mode": "url", "approvers": [BOB]}),
        ("returned", None, {"mode": "url", "approvers": [BOB], "answered": "result"}),
        ("replayed", None, {}),
    ]
    refusals = {"tool": "describe_flag", "mode": "url", "rule": "(tool)", "code": "approval_pending"}
    assert _sample(world.gw, "gateway_write_refusals_total", refusals) == 2


def args_of(args: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in args.items() if name != "idempotencyKey"}


@changes(URL)
async def test_an_agent_that_says_yes_to_its_own_form_or_is_rejected_never_writes(world: World, era: str) -> None:
    before = description(world.flags_db, FLAGS.main), FLAGS.write_count(world.flags_db)
    args = describe_args("the agent's own yes")
    async with connect(world.gw, era, Answers()) as client:  # answers every form with yes, declines every link
        first = await client.call_tool("describe_flag", args)
        approval_id = approval_id_for(implied_plan_id("local", "describe_flag", args["idempotencyKey"], args_of(args)))
        assert (await approve_as(world, "bob", approval_id, "reject")).status_code == 303
        rejected = await client.call_tool("describe_flag", args)
    assert error_code(first) == "approval_pending"
    assert error_code(rejected) == "not_confirmed"
    assert (description(world.flags_db, FLAGS.main), FLAGS.write_count(world.flags_db)) == before


@changes(BUDGETED, reset=BUDGETED)
async def test_passthrough_and_planned_writes_share_the_callers_budget(world: World, era: str) -> None:
    tenants_before = TENANTS.write_count(world.tenants_db)
    async with connect(world.gw, era, Answers()) as client:
        written = [await client.call_tool("describe_flag", describe_args(f"write {n}")) for n in range(2)]
        denied_preview = await client.call_tool(TENANTS.preview_tool, TENANTS.preview_args())
        denied_write = await client.call_tool("describe_flag", describe_args("a third"))
    assert [result.is_error for result in written] == [False, False], [r.content for r in written]
    assert error_code(denied_preview) == error_code(denied_write) == "denied"
    assert error_body(denied_write)["details"] == {"rule": "two_an_hour"}
    assert TENANTS.write_count(world.tenants_db) == tenants_before
    assert description(world.flags_db, FLAGS.main) == "write 1"


@changes(BUDGETED, reset=BUDGETED)
async def test_planned_writes_count_against_a_passthrough_budget(world: World, era: str) -> None:
    async with connect(world.gw, era, Answers()) as client:
        for variant in (0, 1):
            plan = await preview(client, TENANTS, variant=variant)
            reset = await client.call_tool(TENANTS.write_tool, {"planId": plan["planId"], "idempotencyKey": new_key()})
            assert not reset.is_error, reset.content
        before = description(world.flags_db, FLAGS.main), FLAGS.write_count(world.flags_db)
        args = describe_args("past the budget")
        denied = await client.call_tool("describe_flag", args)
    assert error_code(denied) == "denied"
    assert (description(world.flags_db, FLAGS.main), FLAGS.write_count(world.flags_db)) == before
    assert await audit_of(world.gw, args["idempotencyKey"]) == [
        ("refused", "denied", {"mode": "deny", "rule": "two_an_hour"})
    ]
    assert _sample(world.gw, "gateway_denials_total", {"tool": "describe_flag", "rule": "two_an_hour"}) == 1


@changes({**URL, "approval": [{"name": "sandbox_form", "when": 'arguments.sandbox == "yes"', "mode": "form"}]})
async def test_a_rule_that_cannot_be_evaluated_fails_closed_to_the_tools_url_mode(world: World, era: str) -> None:
    before = description(world.flags_db, FLAGS.main), FLAGS.write_count(world.flags_db)
    async with connect(world.gw, era, Answers()) as client:  # an agent that says yes to any form
        result = await client.call_tool("describe_flag", describe_args("no such argument"))
    assert error_code(result) == "approval_pending"  # the page, never the agent's own form
    assert (description(world.flags_db, FLAGS.main), FLAGS.write_count(world.flags_db)) == before


def _sample(gw: Gateway, name: str, labels: dict[str, str]) -> float:
    for metric in gw.metrics.registry.collect():
        for sample in metric.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return float(sample.value)
    return 0.0


@changes({"approval": [{"name": "people_for_main", "when": f'arguments.key == "{FLAGS.main}"', "mode": "url"}]})
async def test_a_rule_can_send_a_passthrough_write_to_people_and_their_reject_names_it(world: World, era: str) -> None:
    before = description(world.flags_db, FLAGS.main), FLAGS.write_count(world.flags_db)
    args = describe_args("needs people")
    async with connect(world.gw, era) as client:
        pending = await client.call_tool("describe_flag", args)
        approval_id = error_body(pending)["details"]["approvalId"]
        assert (await approve_as(world, "carol", approval_id, "reject")).status_code == 303
        rejected = await client.call_tool("describe_flag", args)
    assert (error_code(pending), error_code(rejected)) == ("approval_pending", "not_confirmed")
    assert (description(world.flags_db, FLAGS.main), FLAGS.write_count(world.flags_db)) == before
    decisions = [e async for e in world.gw.store.audit_entries() if e.outcome == "approval"]
    assert [(e.confirmation, e.extra["rule"], e.extra["approver"]["subject"]) for e in decisions] == [
        ("reject", "people_for_main", "carol")
    ]
    assert await audit_of(world.gw, args["idempotencyKey"]) == [
        ("refused", "approval_pending", {"mode": "url", "rule": "people_for_main"}),
        ("refused", "not_confirmed", {"mode": "url", "rule": "people_for_main"}),
    ]
