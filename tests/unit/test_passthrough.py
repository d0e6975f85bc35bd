"""Pass-through tools through a gateway over two backends: the flags backend's own tools, published on purpose.

``flag_history`` is a checked read; ``describe_flag`` (the backend's ``set_flag_description``, renamed) writes,
so it is confirmed and at most once per idempotency key, like a planned write; ``remove_flag`` (its
``delete_flag``) is configured with an output schema its answers do not fit. Every other backend tool is hidden.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import mcp.types as types
import pytest
from mcp.shared.exceptions import MCPError

from gateway.runtime import Gateway
from gateway.write.progress import ASKING, CALLING, DONE
from tests.support.clients import NOT_A_YES, NOT_A_YES_IDS, Answers, connect, error_body, error_code, new_key
from tests.support.configs import HINTS_READ
from tests.support.profiles import FLAGS, Profile

pytestmark = pytest.mark.anyio
REMOVE_FLAG = {
    "kind": "passthrough",
    "backend": "flags",
    "source": "delete_flag",
    "description": "Delete a flag.",
    "annotations": {**HINTS_READ, "read_only": False, "destructive": True, "idempotent": False},
    "output_schema": {"type": "object", "properties": {"removed": {"type": "string"}}, "required": ["removed"]},
}


@pytest.fixture(scope="module")
def profile() -> Profile:
    return FLAGS


@pytest.fixture(scope="module")
def wrapping() -> str:
    return "together"


@pytest.fixture(scope="module")
def tools_change() -> Any:
    def add_remove_flag(profile: Profile, tools: dict[str, Any]) -> None:
        tools["remove_flag"] = REMOVE_FLAG
        tools["retitle_flag"] = {**tools["describe_flag"], "confirm": "typed", "message": None}
        strict = {"type": "object", "properties": {"key": {"type": "integer"}}, "required": ["key"]}
        tools["flag_history_strict"] = {**tools["flag_history"], "source": "flag_history", "output_schema": strict}

    return add_remove_flag


def description(db: Path, key: str) -> str:
    with sqlite3.connect(db) as conn:
        return str(conn.execute("SELECT description FROM flags WHERE key = ?", (key,)).fetchone()[0])


async def audit_of(gw: Gateway, key: str) -> list[tuple[str, str | None]]:
    return [(entry.outcome, entry.code) async for entry in gw.store.audit_entries() if entry.idempotency_key == key]


async def test_only_the_listed_backend_tools_are_published_and_the_rest_are_unknown(
    gw: Gateway, era: str, db: Path
) -> None:
    before = FLAGS.write_count(db)
    async with connect(gw, era) as client:
        listed = {tool.name for tool in (await client.list_tools()).tools}
        for hidden in ("delete_flag", "set_flag_description", "manage_flags"):
            assert hidden not in listed
            with pytest.raises(MCPError) as raised:
                await client.call_tool(hidden, {"key": FLAGS.main, "description": "x"})
            assert raised.value.code == types.INVALID_PARAMS
    assert {"flag_history", "describe_flag", "remove_flag"} <= listed
    assert FLAGS.write_count(db) == before


async def test_a_passthrough_tool_carries_the_stated_hints_and_the_write_an_idempotency_key(gw: Gateway) -> None:
    async with connect(gw, "2026-07-28") as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    history, describe = tools["flag_history"], tools["describe_flag"]
    assert history.annotations is not None and describe.annotations is not None
    assert history.annotations.model_dump(exclude_none=True, exclude={"title"}) == {
        "read_only_hint": True,
        "destructive_hint": False,
        "idempotent_hint": True,
        "open_world_hint": False,
    }
    assert describe.annotations.read_only_hint is False and describe.annotations.destructive_hint is False
    assert describe.title == "Describe a flag"
    assert set(describe.input_schema["required"]) == {"key", "description", "idempotencyKey"}
    assert describe.input_schema["additionalProperties"] is False
    assert describe.output_schema is not None and "replayed" in describe.output_schema["required"]
    assert "idempotencyKey" not in history.input_schema["properties"]
    assert history.output_schema is not None  # the backend's own, passed on
    assert set(history.output_schema["properties"]) == {"key", "writes", "lastOp"}


async def test_a_read_only_passthrough_tool_relays_a_checked_answer(gw: Gateway, era: str, db: Path) -> None:
    before = FLAGS.write_count(db)
    async with connect(gw, era) as client:
        found = await client.call_tool("flag_history", {"key": FLAGS.main})
        extra = await client.call_tool("flag_history", {"key": FLAGS.main, "force": True})
        wrong = await client.call_tool("flag_history", {"key": 7})
        absent = await client.call_tool("flag_history", {"key": FLAGS.absent})
    async with connect(gw, era) as client:
        misfit = await client.call_tool("flag_history_strict", {"key": FLAGS.main})
    assert error_code(misfit) == "backend_error"  # an answer the published output schema does not describe
    assert found.structured_content is not None and found.structured_content["key"] == FLAGS.main
    assert error_code(extra) == "invalid_arguments"
    assert error_code(wrong) == "invalid_arguments"
    assert error_code(absent) == "backend_error"
    assert FLAGS.write_count(db) == before


async def test_a_confirmed_passthrough_write_applies_once_and_a_retry_replays_without_asking(
    gw: Gateway, era: str, db: Path
) -> None:
    answers = Answers()
    text = f"Spare flag, described in {era}"
    args = {"key": FLAGS.spare, "description": text, "idempotencyKey": new_key()}
    before = FLAGS.write_count(db)
    async with connect(gw, era, answers) as client:
        first = await client.call_tool("describe_flag", args)
        retry = await client.call_tool("describe_flag", args)
    assert not first.is_error, first.content
    assert first.structured_content is not None
    assert first.structured_content["flag"]["description"] == text and first.structured_content["replayed"] is False
    assert retry.structured_content == {**first.structured_content, "replayed": True}
    assert description(db, FLAGS.spare) == text
    assert FLAGS.write_count(db) == before + 1
    assert answers.messages == [f'Set the description of flag "{FLAGS.spare}" to "{text}"?']
    assert await audit_of(gw, args["idempotencyKey"]) == [("applied", None), ("replayed", None)]


async def test_a_confirmed_passthrough_write_reports_its_steps_like_a_planned_write(gw: Gateway, era: str) -> None:
    messages: list[str | None] = []

    async def seen(progress: float, total: float | None, message: str | None) -> None:
        messages.append(message)

    args = {"key": FLAGS.other, "description": f"Reported in {era}", "idempotencyKey": new_key()}
    async with connect(gw, era, Answers()) as client:
        done = await client.call_tool("describe_flag", args, progress_callback=seen)
        replayed = len(messages)
        await client.call_tool("describe_flag", args, progress_callback=seen)
    assert not done.is_error, done.content
    # 2026-era clients are asked in a first round of their own, so "asking" comes once more there.
    assert messages[-3:] == [ASKING, CALLING, DONE] and set(messages[:-3]) <= {ASKING}
    assert len(messages) == replayed  # a replay reports nothing


async def test_a_key_reused_with_other_arguments_is_refused_before_any_prompt(gw: Gateway, era: str, db: Path) -> None:
    key = new_key()
    async with connect(gw, era, Answers()) as client:
        first = await client.call_tool(
            "describe_flag", {"key": FLAGS.other, "description": "one", "idempotencyKey": key}
        )
        assert not first.is_error
        before = FLAGS.write_count(db)
        answers = Answers()
    async with connect(gw, era, answers) as client:
        other = await client.call_tool(
            "describe_flag", {"key": FLAGS.other, "description": "two", "idempotencyKey": key}
        )
    assert error_code(other) == "idempotency_key_reused"
    assert answers.prompts == []
    assert FLAGS.write_count(db) == before and description(db, FLAGS.other) == "one"


@pytest.mark.parametrize(("answers", "code"), NOT_A_YES, ids=NOT_A_YES_IDS)
async def test_anything_but_a_yes_to_a_passthrough_write_changes_nothing(
    gw: Gateway, era: str, db: Path, answers: Answers | None, code: str
) -> None:
    key, before = new_key(), (FLAGS.write_count(db), description(db, FLAGS.main))
    async with connect(gw, era, answers) as client:
        result = await client.call_tool(
            "describe_flag", {"key": FLAGS.main, "description": "no", "idempotencyKey": key}
        )
    assert error_code(result) == code
    assert (FLAGS.write_count(db), description(db, FLAGS.main)) == before
    assert await audit_of(gw, key) == [("refused", code)]


async def test_a_typed_confirmation_must_name_the_target_argument(gw: Gateway, era: str, db: Path) -> None:
    before = FLAGS.write_count(db)
    wrong, right = Answers("accept", {"confirmTarget": FLAGS.main}), Answers("accept", {"confirmTarget": FLAGS.other})
    args = {"key": FLAGS.other, "description": f"typed in {era}"}
    async with connect(gw, era, wrong) as client:
        refused = await client.call_tool("retitle_flag", {**args, "idempotencyKey": new_key()})
    async with connect(gw, era, right) as client:
        applied = await client.call_tool("retitle_flag", {**args, "idempotencyKey": new_key()})
    assert error_code(refused) == "not_confirmed"
    assert not applied.is_error, applied.content
    assert FLAGS.write_count(db) == before + 1 and description(db, FLAGS.other) == args["description"]
    asked = right.prompts[0]
    assert isinstance(asked, types.ElicitRequestFormParams)
    assert list(asked.requested_schema["properties"]) == ["confirmTarget"]
    assert right.messages == [f'Call retitle_flag with {{"description": "typed in {era}", "key": "{FLAGS.other}"}}?']


async def test_a_backend_refusal_is_recorded_and_replayed_without_asking_again(gw: Gateway, era: str, db: Path) -> None:
    answers = Answers()
    args = {"key": FLAGS.absent, "description": "ghost", "idempotencyKey": new_key()}
    async with connect(gw, era, answers) as client:
        first = await client.call_tool("describe_flag", args)
        retry = await client.call_tool("describe_flag", args)
    assert error_code(first) == error_code(retry) == "backend_error"
    assert "does not exist" in error_body(first)["details"]["backendMessage"]
    assert len(answers.prompts) == 1
    assert await audit_of(gw, args["idempotencyKey"]) == [
        ("backend_error", "backend_error"),
        ("backend_error", "backend_error"),
    ]


async def test_an_answer_outside_the_output_schema_is_outcome_unknown_and_never_sent_again(
    gw: Gateway, era: str, db: Path
) -> None:
    victim = "load.shedding" if era == "2025-11-25" else FLAGS.protected
    args = {"key": victim, "idempotencyKey": new_key()}
    before = FLAGS.write_count(db)
    async with connect(gw, era, Answers()) as client:
        first = await client.call_tool("remove_flag", args)
        retry = await client.call_tool("remove_flag", args)
    assert error_code(first) == error_code(retry) == "outcome_unknown"
    assert error_body(first)["details"] == {"current": None}
    assert FLAGS.write_count(db) == before + 1  # it did write; the gateway could not tell, so it says so


async def test_a_passthrough_tool_that_does_not_fit_its_backend_is_left_out(gw: Gateway, db: Path) -> None:
    from gateway.catalog.published import build_catalog
    from gateway.config import parse_config

    data = gw.config.model_dump(by_alias=True, exclude_none=True)
    data["tools"]["describe_flag"] = {**data["tools"]["describe_flag"], "source": "no_such_tool"}
    data["tools"]["flag_history"] = {**data["tools"]["flag_history"], "output_schema": None}
    data["tools"]["remove_flag"] = {**REMOVE_FLAG, "output_schema": None}
    config = parse_config(data)
    catalog = build_catalog(config, {"fixtures": {"empty": 0}, "presets": {"off": 0}}, await listings(gw))
    assert catalog.misfits["describe_flag"].key == "tools.describe_flag.source"
    assert catalog.misfits["remove_flag"].key == "tools.remove_flag.output_schema"
    assert "flag_history" in catalog.tools  # its backend declares an outputSchema
    assert {"describe_flag", "remove_flag"}.isdisjoint(catalog.tools)
    assert catalog.unavailable["describe_flag"].code == "backend_error"


async def listings(gw: Gateway) -> dict[str, list[types.Tool]]:
    return {name: await backend.list_tools() for name, backend in gw.backends.items()}
