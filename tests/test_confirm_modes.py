"""Confirmation forms and their limits: typed confirmation, and a prompt nobody answers."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest

from gateway.config import load_config
from gateway.runtime import Gateway
from tests.conftest import (
    ERAS,
    Answers,
    connect,
    error_code,
    gateway_config,
    new_key,
    preview,
    running_gateway,
    write_count,
)

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("backend") / "legacy.db"


@pytest.fixture(scope="module")
async def gw(db: Path, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Gateway]:
    tools = {name: tool.model_dump(by_alias=True, exclude_none=True) for name, tool in load_config().tools.items()}
    tools["reset_tenant"].update(confirm="typed", prompt_timeout_seconds=1)
    config = gateway_config(db, "--seed-demo", state_dir=tmp_path_factory.mktemp("state"), tools=tools)
    async with running_gateway(config) as gateway:
        yield gateway


@pytest.mark.parametrize("era", ERAS)
async def test_typed_confirmation_needs_the_target_id(gw: Gateway, db: Path, era: str) -> None:
    wrong = Answers("accept", {"confirmTarget": "tn_search02"})
    right = Answers("accept", {"confirmTarget": "tn_checkout01"})
    async with connect(gw, era, Answers()) as planner:
        plan = await preview(planner)
    before = write_count(db)
    async with connect(gw, era, wrong) as client:
        refused = await client.call_tool("reset_tenant", {"planId": plan["planId"], "idempotencyKey": new_key()})
    assert error_code(refused) == "not_confirmed"
    assert write_count(db) == before
    async with connect(gw, era, right) as client:
        done = await client.call_tool("reset_tenant", {"planId": plan["planId"], "idempotencyKey": new_key()})
    assert not done.is_error, done.content
    assert write_count(db) == before + 1
    schema = right.prompts[0].requested_schema
    assert list(schema["properties"]) == ["confirmTarget"]


async def test_a_prompt_left_unanswered_times_out_as_not_confirmed(gw: Gateway, db: Path) -> None:
    async def never(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        await anyio.sleep(30)
        raise AssertionError("unreachable")

    async with connect(gw, "2025-11-25", Answers()) as planner:
        plan = await preview(planner)
    before = write_count(db)
    async with connect(gw, "2025-11-25", never) as client:  # type: ignore[arg-type]
        with anyio.fail_after(10):
            result = await client.call_tool("reset_tenant", {"planId": plan["planId"], "idempotencyKey": new_key()})
    assert error_code(result) == "not_confirmed"
    assert write_count(db) == before
