"""Confirmation forms and their limits: typed confirmation, and a prompt nobody answers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest

from gateway.runtime import Gateway
from tests.support.clients import ERAS, Answers, connect, error_code, new_key, preview
from tests.support.profiles import Profile
from tests.unit.conftest import ToolsChange

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def tools_change() -> ToolsChange:
    def typed(profile: Profile, tools: dict[str, Any]) -> None:
        # Short, since one test waits it out; an answer in this process still comes back far sooner.
        tools[profile.write_tool].update(confirm="typed", prompt_timeout_seconds=0.5)

    return typed


@pytest.mark.parametrize("era", ERAS)
async def test_typed_confirmation_needs_the_target_id(gw: Gateway, profile: Profile, db: Path, era: str) -> None:
    wrong = Answers("accept", {"confirmTarget": profile.other})
    right = Answers("accept", {"confirmTarget": profile.main})
    async with connect(gw, era, Answers()) as planner:
        plan = await preview(planner, profile)
    before = profile.write_count(db)
    async with connect(gw, era, wrong) as client:
        refused = await client.call_tool(profile.write_tool, {"planId": plan["planId"], "idempotencyKey": new_key()})
    assert error_code(refused) == "not_confirmed"
    assert profile.write_count(db) == before
    async with connect(gw, era, right) as client:
        done = await client.call_tool(profile.write_tool, {"planId": plan["planId"], "idempotencyKey": new_key()})
    assert not done.is_error, done.content
    assert profile.write_count(db) == before + 1
    prompt = right.prompts[0]
    assert isinstance(prompt, types.ElicitRequestFormParams)
    assert list(prompt.requested_schema["properties"]) == ["confirmTarget"]


async def test_a_prompt_left_unanswered_times_out_as_not_confirmed(gw: Gateway, profile: Profile, db: Path) -> None:
    async def never(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        await anyio.sleep(30)
        raise AssertionError("unreachable")

    async with connect(gw, "2025-11-25", Answers()) as planner:
        plan = await preview(planner, profile)
    before = profile.write_count(db)
    async with connect(gw, "2025-11-25", never) as client:
        with anyio.fail_after(10):
            result = await client.call_tool(profile.write_tool, {"planId": plan["planId"], "idempotencyKey": new_key()})
    assert error_code(result) == "not_confirmed"
    assert profile.write_count(db) == before
