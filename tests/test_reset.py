"""reset_tenant end to end in both protocol eras: confirm, replay, refuse, and never write twice."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
from mcp.shared.exceptions import MCPError

from gateway.runtime import Gateway
from tests.conftest import (
    ERAS,
    Answers,
    Clock,
    connect,
    error_code,
    gateway_config,
    new_key,
    preview,
    running_gateway,
    tenant_state,
    write_count,
)

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("backend") / "legacy.db"


@pytest.fixture(scope="module")
def clock() -> Clock:
    return Clock()


@pytest.fixture(scope="module")
async def gw(db: Path, clock: Clock, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Gateway]:
    config = gateway_config(db, "--seed-demo", state_dir=tmp_path_factory.mktemp("state"))
    async with running_gateway(config, clock) as gateway:
        yield gateway


@pytest.fixture(params=ERAS)
def era(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def move_tenant(db: Path, tenant_id: str, **changes: Any) -> None:
    """Someone else changes the tenant behind the gateway's back."""
    with sqlite3.connect(db) as conn:
        if "protected" in changes:
            conn.execute("UPDATE tenants SET protected = ? WHERE id = ?", (int(changes["protected"]), tenant_id))
        else:
            conn.execute("UPDATE tenants SET version = version + 1 WHERE id = ?", (tenant_id,))


async def audit_of(gw: Gateway, key: str) -> list[Any]:
    return [entry async for entry in gw.store.audit_entries() if entry.idempotency_key == key]


async def test_a_confirmed_reset_writes_once_and_reports_the_new_version(gw: Gateway, era: str, db: Path) -> None:
    answers = Answers()
    before = write_count(db)
    version, rows = tenant_state(db, "tn_checkout01")
    async with connect(gw, era, answers) as client:
        plan = await preview(client, fixture="smoke")
        result = await client.call_tool("reset_tenant", {"planId": plan["planId"], "idempotencyKey": new_key()})
    assert not result.is_error, result.content
    assert result.structured_content == {
        "planId": plan["planId"],
        "tenantId": "tn_checkout01",
        "fixture": "smoke",
        "rowsDeleted": rows,
        "rowsInserted": 25,
        "version": version + 1,
        "replayed": False,
    }
    assert tenant_state(db, "tn_checkout01") == (version + 1, 25)
    assert write_count(db) == before + 1
    assert [prompt.message for prompt in answers.prompts] == [
        f'Delete {rows} rows in tn_checkout01 and load fixture "smoke" (25 rows)?'
    ]


async def test_a_retried_reset_applies_once_replays_and_does_not_ask_again(gw: Gateway, era: str, db: Path) -> None:
    answers = Answers()
    before = write_count(db)
    async with connect(gw, era, answers) as client:
        args = {"planId": (await preview(client))["planId"], "idempotencyKey": new_key()}
        first = await client.call_tool("reset_tenant", args)
        retry = await client.call_tool("reset_tenant", args)
    assert first.structured_content is not None and retry.structured_content is not None
    assert first.structured_content["replayed"] is False
    assert retry.structured_content == {**first.structured_content, "replayed": True}
    assert write_count(db) == before + 1
    assert len(answers.prompts) == 1
    outcomes = [entry.outcome for entry in await audit_of(gw, args["idempotencyKey"])]
    assert outcomes == ["applied", "replayed"]


async def test_a_plan_the_tenant_has_moved_past_is_stale(gw: Gateway, era: str, db: Path) -> None:
    answers = Answers()
    async with connect(gw, era, answers) as client:
        plan = await preview(client)
        move_tenant(db, "tn_checkout01")
        before = write_count(db), tenant_state(db, "tn_checkout01")
        result = await client.call_tool("reset_tenant", {"planId": plan["planId"], "idempotencyKey": new_key()})
    assert error_code(result) == "plan_stale"
    assert (write_count(db), tenant_state(db, "tn_checkout01")) == before
    assert answers.prompts == []


@pytest.mark.parametrize(
    ("answers", "code"),
    [
        (Answers("decline"), "not_confirmed"),
        (Answers("cancel"), "not_confirmed"),
        (Answers("accept", {"confirm": False}), "not_confirmed"),
        (None, "confirmation_unavailable"),
    ],
    ids=["decline", "cancel", "accept-without-yes", "no-capability"],
)
async def test_anything_but_a_yes_changes_nothing(
    gw: Gateway, era: str, db: Path, answers: Answers | None, code: str
) -> None:
    async with connect(gw, era, Answers()) as planner:
        plan = await preview(planner)
    before = write_count(db), tenant_state(db, "tn_checkout01")
    key = new_key()
    async with connect(gw, era, answers) as client:
        result = await client.call_tool("reset_tenant", {"planId": plan["planId"], "idempotencyKey": key})
    assert error_code(result) == code
    assert (write_count(db), tenant_state(db, "tn_checkout01")) == before
    assert [(entry.outcome, entry.code) for entry in await audit_of(gw, key)] == [("refused", code)]


async def test_a_key_used_for_another_plan_is_refused(gw: Gateway, era: str, db: Path) -> None:
    key = new_key()
    async with connect(gw, era, Answers()) as client:
        first = await client.call_tool(
            "reset_tenant", {"planId": (await preview(client))["planId"], "idempotencyKey": key}
        )
        assert not first.is_error
        other = await preview(client, tenant_id="tn_search02")
        before = write_count(db)
        result = await client.call_tool("reset_tenant", {"planId": other["planId"], "idempotencyKey": key})
    assert error_code(result) == "idempotency_key_reused"
    assert write_count(db) == before


async def test_unknown_used_and_expired_plans_are_refused(gw: Gateway, era: str, db: Path, clock: Clock) -> None:
    async with connect(gw, era, Answers()) as client:
        unknown = await client.call_tool(
            "reset_tenant", {"planId": "pl_AAAAAAAAAAAAAAAAAAAAAA", "idempotencyKey": new_key()}
        )
        used = (await preview(client))["planId"]
        assert not (await client.call_tool("reset_tenant", {"planId": used, "idempotencyKey": new_key()})).is_error
        used_again = await client.call_tool("reset_tenant", {"planId": used, "idempotencyKey": new_key()})
        stale_plan = (await preview(client))["planId"]
        before = write_count(db)
        clock.offset += 601
        try:
            expired = await client.call_tool("reset_tenant", {"planId": stale_plan, "idempotencyKey": new_key()})
        finally:
            clock.offset -= 601
    assert error_code(unknown) == "plan_not_found"
    assert error_code(used_again) == "plan_not_found"
    assert error_code(expired) == "plan_expired"
    assert write_count(db) == before


async def test_a_tenant_protected_after_its_preview_is_not_reset(gw: Gateway, era: str, db: Path) -> None:
    async with connect(gw, era, Answers()) as client:
        plan = await preview(client, tenant_id="tn_billing03")
        move_tenant(db, "tn_billing03", protected=True)
        try:
            before = write_count(db)
            result = await client.call_tool("reset_tenant", {"planId": plan["planId"], "idempotencyKey": new_key()})
        finally:
            move_tenant(db, "tn_billing03", protected=False)
    assert error_code(result) == "tenant_protected"
    assert write_count(db) == before


async def test_concurrent_calls_with_one_key_write_once(gw: Gateway, era: str, db: Path) -> None:
    before = write_count(db)
    results: list[types.CallToolResult] = []
    async with connect(gw, era, Answers()) as client:
        args = {"planId": (await preview(client))["planId"], "idempotencyKey": new_key()}

        async def call() -> None:
            results.append(await client.call_tool("reset_tenant", args))

        async with anyio.create_task_group() as tasks:
            for _ in range(4):
                tasks.start_soon(call)
    assert write_count(db) == before + 1
    applied = [r for r in results if not r.is_error and r.structured_content and not r.structured_content["replayed"]]
    assert len(applied) == 1
    for result in results:
        assert (not result.is_error) or error_code(result) == "request_in_progress"


async def test_a_2026_answer_without_a_valid_state_is_not_consent(gw: Gateway, db: Path) -> None:
    yes = types.ElicitResult(action="accept", content={"confirm": True})
    async with connect(gw, "2026-07-28", Answers()) as client:
        args = {"planId": (await preview(client))["planId"], "idempotencyKey": new_key()}
        before = write_count(db)
        no_state = await client.session.call_tool(
            "reset_tenant", args, input_responses={"confirm": yes}, allow_input_required=True
        )
        assert isinstance(no_state, types.InputRequiredResult)
        assert no_state.request_state
        first = await client.session.call_tool(
            "reset_tenant",
            args,
            input_responses={"confirm": yes},
            request_state=no_state.request_state,
            allow_input_required=True,
        )
        assert isinstance(first, types.CallToolResult) and not first.is_error
        other = {"planId": (await preview(client))["planId"], "idempotencyKey": new_key()}
        with pytest.raises(MCPError) as raised:  # state sealed for one call's arguments, sent with another's
            await client.session.call_tool(
                "reset_tenant",
                other,
                input_responses={"confirm": yes},
                request_state=no_state.request_state,
                allow_input_required=True,
            )
    assert raised.value.code == types.INVALID_PARAMS
    assert write_count(db) == before + 1


async def test_a_used_2026_state_is_not_consent_twice(gw: Gateway, db: Path) -> None:
    yes = types.ElicitResult(action="accept", content={"confirm": True})
    async with connect(gw, "2026-07-28", Answers()) as client:
        args = {"planId": (await preview(client))["planId"], "idempotencyKey": new_key()}
        asked = await client.session.call_tool("reset_tenant", args, allow_input_required=True)
        assert isinstance(asked, types.InputRequiredResult)
        move_tenant(db, "tn_checkout01")  # the first answered round is refused as stale, using up the nonce
        stale = await client.session.call_tool(
            "reset_tenant",
            args,
            input_responses={"confirm": yes},
            request_state=asked.request_state,
            allow_input_required=True,
        )
        assert isinstance(stale, types.CallToolResult) and error_code(stale) == "plan_stale"
        args2 = {"planId": (await preview(client))["planId"], "idempotencyKey": args["idempotencyKey"] + "-2"}
        asked2 = await client.session.call_tool("reset_tenant", args2, allow_input_required=True)
        assert isinstance(asked2, types.InputRequiredResult)
        before = write_count(db)
        once = await client.session.call_tool(
            "reset_tenant",
            args2,
            input_responses={"confirm": yes},
            request_state=asked2.request_state,
            allow_input_required=True,
        )
        again = await client.session.call_tool(
            "reset_tenant",
            args2,
            input_responses={"confirm": yes},
            request_state=asked2.request_state,
            allow_input_required=True,
        )
    assert isinstance(once, types.CallToolResult) and not once.is_error
    assert isinstance(again, types.CallToolResult) and again.structured_content is not None
    assert again.structured_content["replayed"] is True
    assert write_count(db) == before + 1


async def test_the_error_body_names_the_next_tool(gw: Gateway, era: str, db: Path) -> None:
    async with connect(gw, era, Answers()) as client:
        plan = await preview(client)
        move_tenant(db, "tn_checkout01")
        result = await client.call_tool("reset_tenant", {"planId": plan["planId"], "idempotencyKey": new_key()})
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    body = json.loads(block.text)
    assert body["code"] == "plan_stale" and body["nextTool"] == "preview_tenant_reset"
