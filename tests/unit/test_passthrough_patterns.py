"""A backend's schema patterns are untrusted: they run in linear time (RE2), and a schema whose patterns cannot is
not published. ``^(a+)+$`` over ``"aaaa…!"`` takes Python's backtracking ``re`` exponential time, and one such
call would hold the gateway's only thread, for every caller and every backend, until it ends.

The backend is a real low-level SDK server in this process, whose tools' schemas carry those patterns."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import mcp_types as types
import pytest
from mcp.server import Server, ServerRequestContext

from gateway.catalog.published import build_catalog
from gateway.config import parse_config
from gateway.runtime import Gateway
from tests.support.clients import connect, error_body, error_code
from tests.support.inprocess import gateway_over

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

CATASTROPHIC = "^(a+)+$"
"""Exponential for a backtracking engine on a run of a's that does not end as the pattern wants."""
STALLING = "a" * 48 + "!"
NAMED = {"type": "object", "properties": {"name": {"type": "string", "pattern": CATASTROPHIC}}}
SCHEMAS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "greet": (NAMED, {"type": "object"}),
    "echo": ({"type": "object"}, NAMED),
    "lookahead": ({"type": "object", "properties": {"name": {"type": "string", "pattern": "(?=a)a\u202e"}}}, NAMED),
    "by_pattern": ({"type": "object", "patternProperties": {CATASTROPHIC: {"type": "string"}}}, {"type": "object"}),
    "deep": ({"type": "object", "properties": {"x": {"anyOf": [{"items": {"pattern": "(a)\\1"}}]}}}, {}),
}
READ_ONLY = {"read_only": True, "destructive": False, "idempotent": True, "open_world": False}


def backend() -> Server[Any]:
    async def on_list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(name=name, input_schema=inputs, output_schema=outputs or {"type": "object"})
                for name, (inputs, outputs) in SCHEMAS.items()
            ]
        )

    async def on_call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        body = {"name": STALLING if params.name == "echo" else "aaa"}
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=json.dumps(body))], structured_content=body
        )

    return Server("patterns", on_list_tools=on_list_tools, on_call_tool=on_call_tool)


def config_data() -> dict[str, Any]:
    return {
        "gateway": {"store": "memory"},
        "backend": {"transport": "stdio", "command": "unused"},
        "tools": {name: {"kind": "passthrough", "annotations": READ_ONLY} for name in SCHEMAS},
    }


@pytest.fixture(scope="module")
async def gw(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Gateway]:
    data = config_data()
    data["gateway"]["state_dir"] = str(tmp_path_factory.mktemp("patterns"))
    async with gateway_over(backend(), data) as running:
        yield running


async def test_a_catastrophic_input_pattern_refuses_a_stalling_value_at_once(gw: Gateway, era: str) -> None:
    async with connect(gw, era) as client:
        stalling = await client.call_tool("greet", {"name": STALLING})
        fine = await client.call_tool("greet", {"name": "aaaa"})
    assert error_code(stalling) == "invalid_arguments"
    assert fine.structured_content == {"name": "aaa"}


async def test_a_catastrophic_output_pattern_refuses_a_stalling_answer_at_once(gw: Gateway, era: str) -> None:
    async with connect(gw, era) as client:
        answered = await client.call_tool("echo", {})
    assert error_code(answered) == "backend_error"


async def test_a_schema_whose_patterns_cannot_run_in_linear_time_is_not_published(gw: Gateway) -> None:
    async with connect(gw, "2026-07-28") as client:
        listed = {tool.name for tool in (await client.list_tools()).tools}
        refused = await client.call_tool("lookahead", {"name": "a"})
    assert listed == {"greet", "echo"}
    assert error_code(refused) == "backend_error" and "does not fit" in error_body(refused)["message"]


def test_the_refusal_names_the_pattern_escaped_and_why() -> None:
    catalog = build_catalog(
        parse_config(config_data()),
        {},
        {
            "default": [
                types.Tool(name=name, input_schema=inputs, output_schema=outputs or {"type": "object"})
                for name, (inputs, outputs) in SCHEMAS.items()
            ]
        },
    )
    reasons = {name: str(misfit) for name, misfit in catalog.misfits.items()}
    assert set(reasons) == {"lookahead", "by_pattern", "deep"}
    assert "(?=a)a\\u202e" in reasons["lookahead"] and "\u202e" not in reasons["lookahead"]
    assert "cannot be checked in linear time" in reasons["lookahead"]
    assert "patternProperties" in reasons["by_pattern"]
    assert "(a)\\\\1" in reasons["deep"]  # the backslash itself escaped
