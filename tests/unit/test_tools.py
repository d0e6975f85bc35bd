"""The published tools: honest annotations, output schemas, read-only tools that write nothing, bounds.

Every test runs against the profile's own gateway and against one gateway over both profiles' backends (with
pass-through tools beside the god-tools' mapped tools)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mcp.types as types
import pytest
from mcp.shared.exceptions import MCPError

from gateway.runtime import Gateway
from tests.support.clients import connect, error_body, error_code
from tests.support.profiles import FLAGS, PROFILES, Profile

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module", params=["alone", "together"])
def wrapping(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def sample_args() -> dict[str, dict[str, Any]]:
    samples: dict[str, dict[str, Any]] = {"flag_history": {"key": FLAGS.main}}
    for each in PROFILES:
        samples.update({each.list_tool: {}, each.preview_tool: each.preview_args()})
    return samples


def every_database(profile: Profile, db: Path) -> list[tuple[Profile, Path]]:
    """The profile's backend database and, in a gateway over both backends, the other one beside it."""
    paths = [(each, db if each is profile else db.with_name(f"{each.name}.db")) for each in PROFILES]
    return [(each, path) for each, path in paths if path.exists()]


def state_of(profile: Profile, db: Path) -> list[Any]:
    return [(each.write_count(path), each.snapshot(path, each.main)) for each, path in every_database(profile, db)]


async def test_every_tool_states_all_hints_and_has_an_output_schema(gw: Gateway, profile: Profile, era: str) -> None:
    async with connect(gw, era) as client:
        tools = (await client.list_tools()).tools
    assert {tool.name for tool in tools} == set(gw.config.tools)
    assert {profile.list_tool, profile.preview_tool, profile.write_tool} <= set(gw.config.tools)
    for tool in tools:
        assert tool.annotations is not None, tool.name
        hints = tool.annotations.model_dump(by_alias=True, exclude_none=True)
        assert {"readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"} <= set(hints), tool.name
        assert hints["openWorldHint"] is False
        assert tool.output_schema is not None, tool.name
        assert tool.input_schema.get("additionalProperties") is False, tool.name
    write = next(tool for tool in tools if tool.name == profile.write_tool)
    assert write.annotations is not None
    assert write.annotations.read_only_hint is False
    assert write.annotations.destructive_hint is True
    assert write.annotations.idempotent_hint is True
    assert set(write.input_schema["properties"]) == {"planId", "idempotencyKey"}


def type_arrays(schema: Any, where: str = "") -> list[str]:
    """Where a schema spells a type as an array (``["string", "null"]``), which not every client reads."""
    if isinstance(schema, dict):
        here = [where or "/"] if isinstance(schema.get("type"), list) else []
        return here + [found for key, value in schema.items() for found in type_arrays(value, f"{where}/{key}")]
    if isinstance(schema, list):
        return [found for index, value in enumerate(schema) for found in type_arrays(value, f"{where}/{index}")]
    return []


async def test_no_published_schema_spells_a_type_as_an_array(gw: Gateway, era: str) -> None:
    async with connect(gw, era) as client:
        tools = (await client.list_tools()).tools
    for tool in tools:
        assert type_arrays(tool.input_schema) == [], tool.name
        assert type_arrays(tool.output_schema) == [], tool.name


async def test_the_god_tool_is_not_listed_and_cannot_be_called(
    gw: Gateway, profile: Profile, era: str, db: Path
) -> None:
    before = profile.write_count(db)
    god_tools = [backend.tool for backend in gw.config.backend_sections().values()]
    async with connect(gw, era) as client:
        listed = {tool.name for tool in (await client.list_tools()).tools}
        for god_tool in god_tools:
            assert god_tool not in listed
            with pytest.raises(MCPError) as raised:
                await client.call_tool(god_tool, {"action": "wipe", "payload": {"id": profile.main}})
            assert raised.value.code == types.INVALID_PARAMS
    assert profile.write_count(db) == before


async def test_unknown_tool_is_a_json_rpc_invalid_params_error(gw: Gateway, profile: Profile, era: str) -> None:
    async with connect(gw, era) as client:
        with pytest.raises(MCPError) as raised:
            await client.call_tool(profile.write_tool + "s", {})
    assert raised.value.code == types.INVALID_PARAMS


async def test_every_read_only_tool_in_tools_list_changes_nothing(
    gw: Gateway, profile: Profile, era: str, db: Path
) -> None:
    before = state_of(profile, db)
    samples = sample_args()
    async with connect(gw, era) as client:
        tools = (await client.list_tools()).tools
        read_only = [tool for tool in tools if tool.annotations and tool.annotations.read_only_hint]
        assert read_only
        for tool in read_only:
            assert tool.name in samples, f"add sample arguments for {tool.name}"
            result = await client.call_tool(tool.name, samples[tool.name])
            assert not result.is_error, (tool.name, result.content)
    assert state_of(profile, db) == before


async def test_success_carries_structured_content_and_the_same_json_as_text(
    gw: Gateway, profile: Profile, era: str
) -> None:
    import json

    async with connect(gw, era) as client:
        result = await client.call_tool(profile.list_tool, {})
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    assert result.structured_content is not None
    assert json.loads(block.text) == result.structured_content
    ids = [item[profile.id_field] for item in result.structured_content[profile.items_key]]
    assert ids == sorted(ids) and profile.protected in ids


def bad_arguments(profile: Profile) -> list[tuple[str, dict[str, Any]]]:
    good = profile.preview_args()
    return [
        (profile.list_tool, {"limit": 500}),
        (profile.list_tool, {"limit": 0}),
        (profile.list_tool, {"limit": "10"}),
        (profile.list_tool, {"limit": 10.5}),
        (profile.list_tool, {"limit": True}),
        (profile.list_tool, {"page": 2}),
        (profile.preview_tool, {profile.target_arg: profile.main}),
        (profile.preview_tool, {**good, profile.choice_arg: "nope"}),
        (profile.preview_tool, {**good, profile.target_arg: "../etc"}),
        (profile.preview_tool, {**good, profile.target_arg: 7}),
        (profile.preview_tool, {**good, "force": True}),
        (profile.write_tool, {"planId": "pl_x", "idempotencyKey": "k"}),
        (profile.write_tool, {"planId": "pl_aaaaaaaaaaaaaaaaaaaaaa"}),
        (profile.write_tool, {**good, "idempotencyKey": "key-12345678"}),
    ]


@pytest.mark.parametrize("case", range(14))
async def test_bad_arguments_are_refused_without_coercion_or_backend_writes(
    gw: Gateway, profile: Profile, era: str, db: Path, case: int
) -> None:
    tool, arguments = bad_arguments(profile)[case]
    before = profile.write_count(db)
    async with connect(gw, era) as client:
        result = await client.call_tool(tool, arguments)
    assert error_code(result) == "invalid_arguments", (tool, arguments)
    assert profile.write_count(db) == before


async def test_oversized_arguments_are_refused_as_too_large(gw: Gateway, profile: Profile, era: str, db: Path) -> None:
    deep: Any = "x"
    for _ in range(40):
        deep = {"a": deep}
    before = profile.write_count(db)
    async with connect(gw, era) as client:
        nested = await client.call_tool(profile.list_tool, {"cursor": deep})
        long = await client.call_tool(profile.list_tool, {"cursor": "x" * 70_000})
        many = await client.call_tool(profile.write_tool, {"planId": list(range(20_000))})
    assert error_code(nested) == "request_too_large"
    assert error_code(long) == "request_too_large"
    assert error_code(many) == "request_too_large"
    # Each names the argument and the limit it passed, in the details and in the sentence.
    expected: list[tuple[types.CallToolResult, dict[str, Any]]] = [
        (nested, {"field": "cursor" + ".a" * 15, "limit": 16, "setting": "limits.max_depth"}),
        (long, {"field": "cursor", "limit": 65_536, "setting": "limits.max_string_bytes"}),
        (many, {"field": None, "limit": 10_000, "setting": "limits.max_elements"}),
    ]
    for result, details in expected:
        body = error_body(result)
        assert body["details"] == details
        assert str(details["limit"]) in body["message"] and str(details["setting"]) in body["message"]
        assert details["field"] is None or f"`{details['field']}`" in body["message"]
    assert profile.write_count(db) == before


async def test_preview_of_a_protected_target_gives_no_plan(gw: Gateway, profile: Profile, era: str) -> None:
    async with connect(gw, era) as client:
        result = await client.call_tool(profile.preview_tool, profile.preview_args(profile.protected))
    assert error_code(result) == f"{profile.noun}_protected"


async def test_preview_of_an_absent_target_is_not_found(gw: Gateway, profile: Profile, era: str) -> None:
    async with connect(gw, era) as client:
        result = await client.call_tool(profile.preview_tool, profile.preview_args(profile.absent))
    assert error_code(result) == f"{profile.noun}_not_found"


async def test_preview_returns_a_random_expiring_plan_at_the_current_version(
    gw: Gateway, profile: Profile, era: str, db: Path
) -> None:
    async with connect(gw, era) as client:
        first = await client.call_tool(profile.preview_tool, profile.preview_args(variant=1))
        second = await client.call_tool(profile.preview_tool, profile.preview_args(variant=1))
    plan, again = first.structured_content, second.structured_content
    assert plan is not None and again is not None
    assert plan["planId"].startswith("pl_") and len(plan["planId"]) >= 22
    assert plan["planId"] != again["planId"]
    assert plan["version"] == profile.version(db, profile.main)
    assert plan["expiresAt"].endswith("Z")
    assert plan[profile.target_arg] == profile.main and plan[profile.choice_arg] == profile.choices[1]
