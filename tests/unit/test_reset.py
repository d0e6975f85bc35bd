"""The write tool end to end in both protocol eras: confirm, replay, refuse, and never write twice; through the
profile's own gateway and through one gateway over both profiles' backends."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
from mcp.shared.exceptions import MCPError

from gateway.runtime import Gateway
from tests.support.clients import (
    NOT_A_YES,
    NOT_A_YES_IDS,
    Answers,
    Clock,
    applied_body,
    connect,
    error_body,
    error_code,
    new_key,
    preview,
)
from tests.support.profiles import Profile

pytestmark = pytest.mark.anyio
YES = types.ElicitResult(action="accept", content={"confirm": True})


@pytest.fixture(scope="module", params=["alone", "together"])
def wrapping(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def audit_of(gw: Gateway, key: str) -> list[Any]:
    return [entry async for entry in gw.store.audit_entries() if entry.idempotency_key == key]


async def test_a_confirmed_write_applies_once_and_reports_the_new_version(
    gw: Gateway, profile: Profile, era: str, db: Path
) -> None:
    answers = Answers()
    before, version = profile.write_count(db), profile.version(db, profile.main)
    async with connect(gw, era, answers) as client:
        plan = await preview(client, profile, variant=1)
        result = await client.call_tool(profile.write_tool, {"planId": plan["planId"], "idempotencyKey": new_key()})
    assert not result.is_error, result.content
    assert result.structured_content == applied_body(plan, version + 1)
    assert profile.version(db, profile.main) == version + 1
    assert profile.applied(db, profile.main, profile.choices[1])
    assert profile.write_count(db) == before + 1
    assert answers.messages == [profile.message(plan)]


async def test_a_retried_write_applies_once_replays_and_does_not_ask_again(
    gw: Gateway, profile: Profile, era: str, db: Path
) -> None:
    answers = Answers()
    before = profile.write_count(db)
    async with connect(gw, era, answers) as client:
        args = {"planId": (await preview(client, profile))["planId"], "idempotencyKey": new_key()}
        first = await client.call_tool(profile.write_tool, args)
        retry = await client.call_tool(profile.write_tool, args)
    assert first.structured_content is not None and retry.structured_content is not None
    assert first.structured_content["replayed"] is False
    assert retry.structured_content == {**first.structured_content, "replayed": True}
    assert profile.write_count(db) == before + 1
    assert len(answers.prompts) == 1
    outcomes = [entry.outcome for entry in await audit_of(gw, args["idempotencyKey"])]
    assert outcomes == ["applied", "replayed"]


async def test_a_plan_the_target_has_moved_past_is_stale(gw: Gateway, profile: Profile, era: str, db: Path) -> None:
    answers = Answers()
    async with connect(gw, era, answers) as client:
        plan = await preview(client, profile)
        profile.bump(db, profile.main)
        before = profile.write_count(db), profile.snapshot(db, profile.main)
        result = await client.call_tool(profile.write_tool, {"planId": plan["planId"], "idempotencyKey": new_key()})
    assert error_code(result) == "plan_stale"
    assert error_body(result)["nextTool"] == profile.preview_tool
    assert (profile.write_count(db), profile.snapshot(db, profile.main)) == before
    assert answers.prompts == []


@pytest.mark.parametrize(("answers", "code"), NOT_A_YES, ids=NOT_A_YES_IDS)
async def test_anything_but_a_yes_changes_nothing(
    gw: Gateway, profile: Profile, era: str, db: Path, answers: Answers | None, code: str
) -> None:
    async with connect(gw, era, Answers()) as planner:
        plan = await preview(planner, profile)
    before = profile.write_count(db), profile.snapshot(db, profile.main)
    key = new_key()
    async with connect(gw, era, answers) as client:
        result = await client.call_tool(profile.write_tool, {"planId": plan["planId"], "idempotencyKey": key})
    assert error_code(result) == code
    assert (profile.write_count(db), profile.snapshot(db, profile.main)) == before
    assert [(entry.outcome, entry.code) for entry in await audit_of(gw, key)] == [("refused", code)]


async def test_a_key_used_for_another_plan_is_refused(gw: Gateway, profile: Profile, era: str, db: Path) -> None:
    key = new_key()
    async with connect(gw, era, Answers()) as client:
        plan = await preview(client, profile)
        first = await client.call_tool(profile.write_tool, {"planId": plan["planId"], "idempotencyKey": key})
        assert not first.is_error
        other = await preview(client, profile, target=profile.other)
        before = profile.write_count(db)
        result = await client.call_tool(profile.write_tool, {"planId": other["planId"], "idempotencyKey": key})
    assert error_code(result) == "idempotency_key_reused"
    assert profile.write_count(db) == before


async def test_unknown_used_and_expired_plans_are_refused(
    gw: Gateway, profile: Profile, era: str, db: Path, clock: Clock
) -> None:
    async with connect(gw, era, Answers()) as client:
        unknown = await client.call_tool(
            profile.write_tool, {"planId": "pl_AAAAAAAAAAAAAAAAAAAAAA", "idempotencyKey": new_key()}
        )
        used = (await preview(client, profile))["planId"]
        assert not (await client.call_tool(profile.write_tool, {"planId": used, "idempotencyKey": new_key()})).is_error
        used_again = await client.call_tool(profile.write_tool, {"planId": used, "idempotencyKey": new_key()})
        old_plan = (await preview(client, profile))["planId"]
        before = profile.write_count(db)
        clock.offset += 601
        try:
            expired = await client.call_tool(profile.write_tool, {"planId": old_plan, "idempotencyKey": new_key()})
        finally:
            clock.offset -= 601
    assert error_code(unknown) == "plan_not_found"
    assert error_code(used_again) == "plan_not_found"
    assert error_code(expired) == "plan_expired"
    assert profile.write_count(db) == before


async def test_a_target_protected_after_its_preview_is_not_changed(
    gw: Gateway, profile: Profile, era: str, db: Path
) -> None:
    async with connect(gw, era, Answers()) as client:
        plan = await preview(client, profile, target=profile.spare)
        profile.set_protected(db, profile.spare, True)
        try:
            before = profile.write_count(db)
            result = await client.call_tool(profile.write_tool, {"planId": plan["planId"], "idempotencyKey": new_key()})
        finally:
            profile.set_protected(db, profile.spare, False)
    assert error_code(result) == f"{profile.noun}_protected"
    assert profile.write_count(db) == before


async def test_concurrent_calls_with_one_key_write_once(gw: Gateway, profile: Profile, era: str, db: Path) -> None:
    before = profile.write_count(db)
    results: list[types.CallToolResult] = []
    async with connect(gw, era, Answers()) as client:
        args = {"planId": (await preview(client, profile))["planId"], "idempotencyKey": new_key()}

        async def call() -> None:
            results.append(await client.call_tool(profile.write_tool, args))

        async with anyio.create_task_group() as tasks:
            for _ in range(4):
                tasks.start_soon(call)
    assert profile.write_count(db) == before + 1
    applied = [r for r in results if not r.is_error and r.structured_content and not r.structured_content["replayed"]]
    assert len(applied) == 1
    for result in results:
        assert (not result.is_error) or error_code(result) == "request_in_progress"


async def test_two_plans_for_one_target_confirmed_at_once_give_one_write(
    gw: Gateway, profile: Profile, era: str, db: Path
) -> None:
    before = profile.write_count(db)
    results: list[types.CallToolResult] = []
    async with connect(gw, era, Answers()) as client:
        plans = [await preview(client, profile, variant=variant) for variant in (0, 1)]

        async def call(plan: dict[str, Any]) -> None:
            results.append(
                await client.call_tool(profile.write_tool, {"planId": plan["planId"], "idempotencyKey": new_key()})
            )

        async with anyio.create_task_group() as tasks:
            for plan in plans:
                tasks.start_soon(call, plan)
    assert profile.write_count(db) == before + 1
    assert sorted("applied" if not r.is_error else error_code(r) for r in results) == ["applied", "plan_stale"]


async def test_a_2026_answer_without_a_valid_state_is_not_consent(gw: Gateway, profile: Profile, db: Path) -> None:
    async with connect(gw, "2026-07-28", Answers()) as client:
        args = {"planId": (await preview(client, profile))["planId"], "idempotencyKey": new_key()}
        before = profile.write_count(db)
        no_state = await client.session.call_tool(
            profile.write_tool, args, input_responses={"confirm": YES}, allow_input_required=True
        )
        assert isinstance(no_state, types.InputRequiredResult)
        assert no_state.request_state
        first = await client.session.call_tool(
            profile.write_tool,
            args,
            input_responses={"confirm": YES},
            request_state=no_state.request_state,
            allow_input_required=True,
        )
        assert isinstance(first, types.CallToolResult) and not first.is_error
        other = {"planId": (await preview(client, profile))["planId"], "idempotencyKey": new_key()}
        with pytest.raises(MCPError) as raised:  # state sealed for one call's arguments, sent with another's
            await client.session.call_tool(
                profile.write_tool,
                other,
                input_responses={"confirm": YES},
                request_state=no_state.request_state,
                allow_input_required=True,
            )
    assert raised.value.code == types.INVALID_PARAMS
    assert profile.write_count(db) == before + 1


async def test_a_used_2026_state_is_not_consent_twice(gw: Gateway, profile: Profile, db: Path) -> None:
    async with connect(gw, "2026-07-28", Answers()) as client:

        async def ask(args: dict[str, Any]) -> types.InputRequiredResult:
            asked = await client.session.call_tool(profile.write_tool, args, allow_input_required=True)
            assert isinstance(asked, types.InputRequiredResult)
            return asked

        async def answer(args: dict[str, Any], asked: types.InputRequiredResult) -> Any:
            return await client.session.call_tool(
                profile.write_tool,
                args,
                input_responses={"confirm": YES},
                request_state=asked.request_state,
                allow_input_required=True,
            )

        args = {"planId": (await preview(client, profile))["planId"], "idempotencyKey": new_key()}
        asked = await ask(args)
        profile.bump(db, profile.main)  # this answered round is refused as stale, using up its nonce
        stale = await answer(args, asked)
        assert isinstance(stale, types.CallToolResult) and error_code(stale) == "plan_stale"
        args = {"planId": (await preview(client, profile))["planId"], "idempotencyKey": new_key()}
        asked = await ask(args)
        before = profile.write_count(db)
        once = await answer(args, asked)
        again = await answer(args, asked)
        with pytest.raises(MCPError):  # the sealed state is bound to the first key's arguments
            await answer({**args, "idempotencyKey": new_key()}, asked)
    assert isinstance(once, types.CallToolResult) and not once.is_error
    assert isinstance(again, types.CallToolResult) and again.structured_content is not None
    assert again.structured_content["replayed"] is True
    assert profile.write_count(db) == before + 1


@pytest.mark.parametrize("state", ["v1.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "not-even-sealed", ""])
async def test_a_forged_2026_state_is_refused_before_the_handler(
    gw: Gateway, profile: Profile, db: Path, state: str
) -> None:
    async with connect(gw, "2026-07-28", Answers()) as client:
        args = {"planId": (await preview(client, profile))["planId"], "idempotencyKey": new_key()}
        before = profile.write_count(db)
        try:
            result: Any = await client.session.call_tool(
                profile.write_tool,
                args,
                input_responses={"confirm": YES},
                request_state=state,
                allow_input_required=True,
            )
        except MCPError as exc:
            assert exc.code == types.INVALID_PARAMS
        else:  # an empty state is no state: the user is asked, never taken as consent
            assert state == "" and isinstance(result, types.InputRequiredResult)
    assert profile.write_count(db) == before
