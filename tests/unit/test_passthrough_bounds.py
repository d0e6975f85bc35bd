"""A pass-through tool's answer is bounded like a planned one, and what its backend says of it is escaped; no
backend tool is published twice or shadowed by another of the same name.

The backend here is a real low-level SDK server in this process (over the SDK's in-memory transport), whose tools
answer past the gateway's ``[limits]``: more elements, a longer string, deeper nesting than a caller may send. A
read then answers ``backend_error``; a write (it was sent, and the backend answered) ``outcome_unknown``, recorded
and audited, as a planned write's malformed answer is."""

from __future__ import annotations

import json
import unicodedata
from collections.abc import AsyncIterator
from typing import Any

import mcp_types as types
import pytest
from mcp.server import Server, ServerRequestContext

from gateway.catalog.published import build_catalog
from gateway.config import ConfigError, parse_config
from gateway.runtime import Gateway
from gateway.text import HIDDEN
from tests.support.clients import Answers, connect, error_code, new_key
from tests.support.inprocess import gateway_over

pytestmark = pytest.mark.anyio

READ_ONLY = {"read_only": True, "destructive": False, "idempotent": True, "open_world": False}
WRITES = {**READ_ONLY, "read_only": False, "idempotent": False}
ANSWERS: dict[str, Any] = {
    "many": {"items": list(range(20_000))},
    "long": {"text": "x" * 100_000},
    "deep": {"nested": json.loads("[" * 40 + "]" * 40)},
    "fine": {"items": [1, 2, 3]},
}
INVISIBLE = "Reads\u202e a note.\U000e0049\U000e0047\U000e004e\U000e004f\U000e0052\U000e0045"
"""Bidi text and Unicode tag characters: an instruction a model reads and a person does not see."""
OUTPUT = {"type": "object"}
TOOLS = [
    types.Tool(
        name=name, description=INVISIBLE, title=f"\u202e{name}", input_schema={"type": "object"}, output_schema=OUTPUT
    )
    for name in [*ANSWERS, "write_many"]
]


def backend() -> Server[Any]:
    async def on_list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=TOOLS)

    async def on_call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        body = ANSWERS[params.name.removeprefix("write_")]
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=json.dumps(body))], structured_content=body
        )

    return Server("bounds", on_list_tools=on_list_tools, on_call_tool=on_call_tool)


def config_data(**tools: dict[str, Any]) -> dict[str, Any]:
    return {
        "gateway": {"store": "memory"},
        "backend": {"transport": "stdio", "command": "unused"},
        "rate_limits": {"per_caller": {"per_second": 1e9, "burst": 1_000_000_000}},
        "tools": tools,
    }


def passthrough(annotations: dict[str, bool] = READ_ONLY, **extra: Any) -> dict[str, Any]:
    return {"kind": "passthrough", "annotations": annotations, **extra}


@pytest.fixture(scope="module")
async def gw(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Gateway]:
    data = config_data(
        **{name: passthrough() for name in ANSWERS},
        write_many=passthrough(WRITES),
    )
    data["gateway"]["state_dir"] = str(tmp_path_factory.mktemp("bounds"))
    async with gateway_over(backend(), data) as running:
        yield running


@pytest.mark.parametrize("tool", ["many", "long", "deep"])
async def test_a_passthrough_read_past_the_limits_is_a_backend_error(gw: Gateway, era: str, tool: str) -> None:
    async with connect(gw, era) as client:
        result = await client.call_tool(tool, {})
        fine = await client.call_tool("fine", {})
    assert error_code(result) == "backend_error"
    assert fine.structured_content == ANSWERS["fine"]


async def test_a_passthrough_write_answered_past_the_limits_is_outcome_unknown_and_audited(
    gw: Gateway, era: str
) -> None:
    key = new_key()
    async with connect(gw, era, Answers()) as client:
        first = await client.call_tool("write_many", {"idempotencyKey": key})
        again = await client.call_tool("write_many", {"idempotencyKey": key})
    assert error_code(first) == "outcome_unknown" and error_code(again) == "outcome_unknown"
    outcomes = [entry.outcome async for entry in gw.store.audit_entries() if entry.idempotency_key == key]
    assert outcomes[0] == "unknown"


async def test_what_the_backend_says_of_a_passthrough_tool_reaches_no_client_with_hidden_characters(
    gw: Gateway,
) -> None:
    async with connect(gw, "2026-07-28") as client:
        tools = (await client.list_tools()).tools
    for tool in tools:
        for text in (tool.title or "", tool.description or ""):
            assert [char for char in text if unicodedata.category(char) in HIDDEN] == []
    assert (
        tools[0].description == "Reads\\u202e a note.\\U000e0049\\U000e0047\\U000e004e\\U000e004f\\U000e0052\\U000e0045"
    )


def test_one_backend_tool_published_read_only_under_one_name_and_writing_under_another_is_refused() -> None:
    data = config_data(fine=passthrough(), fine_too=passthrough(WRITES, source="fine"))
    with pytest.raises(ConfigError) as raised:
        parse_config(data)
    assert "tools.fine_too" in str(raised.value) and "tools.fine" in str(raised.value)


def test_a_backend_that_lists_two_tools_of_one_name_publishes_neither() -> None:
    config = parse_config(config_data(fine=passthrough()))
    twice = [*TOOLS, types.Tool(name="fine", input_schema={"type": "object"}, output_schema=OUTPUT)]
    catalog = build_catalog(config, {}, {"default": twice})
    assert "fine" not in catalog.tools
    assert "lists two tools named" in catalog.misfits["fine"].sentence
