"""The published tools: honest annotations, output schemas, read-only tools that write nothing, bounds."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import mcp.types as types
import pytest
from mcp.shared.exceptions import MCPError

from gateway.runtime import Gateway
from tests.conftest import ERAS, connect, error_code, gateway_config, running_gateway, tenant_state, write_count

pytestmark = pytest.mark.anyio

SAMPLE_ARGS: dict[str, dict[str, Any]] = {
    "list_tenants": {},
    "preview_tenant_reset": {"tenantId": "tn_checkout01", "fixture": "empty"},
}


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("backend") / "legacy.db"


@pytest.fixture(scope="module")
async def gw(db: Path, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Gateway]:
    config = gateway_config(db, "--seed-demo", state_dir=tmp_path_factory.mktemp("state"))
    async with running_gateway(config) as gateway:
        yield gateway


@pytest.fixture(params=ERAS)
def era(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def test_every_tool_states_all_hints_and_has_an_output_schema(gw: Gateway, era: str) -> None:
    async with connect(gw, era) as client:
        tools = (await client.list_tools()).tools
    assert {tool.name for tool in tools} == {"list_tenants", "preview_tenant_reset", "reset_tenant"}
    for tool in tools:
        assert tool.annotations is not None, tool.name
        hints = tool.annotations.model_dump(by_alias=True, exclude_none=True)
        assert {"readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"} <= set(hints), tool.name
        assert hints["openWorldHint"] is False
        assert tool.output_schema is not None, tool.name
        assert tool.input_schema.get("additionalProperties") is False, tool.name
    reset = next(tool for tool in tools if tool.name == "reset_tenant")
    assert reset.annotations is not None
    assert reset.annotations.read_only_hint is False
    assert reset.annotations.destructive_hint is True
    assert reset.annotations.idempotent_hint is True


async def test_the_god_tool_is_not_listed_and_cannot_be_called(gw: Gateway, era: str, db: Path) -> None:
    before = write_count(db)
    async with connect(gw, era) as client:
        assert "manage_tenant" not in {tool.name for tool in (await client.list_tools()).tools}
        with pytest.raises(MCPError) as raised:
            await client.call_tool("manage_tenant", {"action": "wipe", "payload": {"id": "tn_checkout01"}})
    assert raised.value.code == types.INVALID_PARAMS
    assert write_count(db) == before


async def test_unknown_tool_is_a_json_rpc_invalid_params_error(gw: Gateway, era: str) -> None:
    async with connect(gw, era) as client:
        with pytest.raises(MCPError) as raised:
            await client.call_tool("reset_tenants", {})
    assert raised.value.code == types.INVALID_PARAMS


async def test_every_read_only_tool_in_tools_list_changes_nothing(gw: Gateway, era: str, db: Path) -> None:
    before_writes, before_state = write_count(db), tenant_state(db, "tn_checkout01")
    async with connect(gw, era) as client:
        read_only = [tool for tool in (await client.list_tools()).tools if tool.annotations.read_only_hint]
        assert read_only
        for tool in read_only:
            assert tool.name in SAMPLE_ARGS, f"add sample arguments for {tool.name}"
            result = await client.call_tool(tool.name, SAMPLE_ARGS[tool.name])
            assert not result.is_error, (tool.name, result.content)
    assert write_count(db) == before_writes
    assert tenant_state(db, "tn_checkout01") == before_state


async def test_success_carries_structured_content_and_the_same_json_as_text(gw: Gateway, era: str) -> None:
    import json

    async with connect(gw, era) as client:
        result = await client.call_tool("list_tenants", {})
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    assert json.loads(block.text) == result.structured_content
    ids = [tenant["id"] for tenant in result.structured_content["tenants"]]
    assert ids == sorted(ids) and "tn_prod_eu" in ids


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("list_tenants", {"limit": 500}),
        ("list_tenants", {"limit": 0}),
        ("list_tenants", {"limit": "10"}),
        ("list_tenants", {"limit": 10.5}),
        ("list_tenants", {"limit": True}),
        ("list_tenants", {"page": 2}),
        ("preview_tenant_reset", {"tenantId": "tn_checkout01"}),
        ("preview_tenant_reset", {"tenantId": "tn_checkout01", "fixture": "nope"}),
        ("preview_tenant_reset", {"tenantId": "../etc", "fixture": "empty"}),
        ("preview_tenant_reset", {"tenantId": 7, "fixture": "empty"}),
        ("preview_tenant_reset", {"tenantId": "tn_checkout01", "fixture": "empty", "force": True}),
        ("reset_tenant", {"planId": "pl_x", "idempotencyKey": "k"}),
        ("reset_tenant", {"planId": "pl_aaaaaaaaaaaaaaaaaaaaaa"}),
        ("reset_tenant", {"tenantId": "tn_checkout01", "fixture": "empty", "idempotencyKey": "key-12345678"}),
    ],
)
async def test_bad_arguments_are_refused_without_coercion_or_backend_writes(
    gw: Gateway, era: str, db: Path, tool: str, arguments: dict[str, Any]
) -> None:
    before = write_count(db)
    async with connect(gw, era) as client:
        result = await client.call_tool(tool, arguments)
    assert error_code(result) == "invalid_arguments"
    assert write_count(db) == before


async def test_oversized_arguments_are_refused_as_too_large(gw: Gateway, era: str) -> None:
    deep: Any = "x"
    for _ in range(40):
        deep = {"a": deep}
    async with connect(gw, era) as client:
        nested = await client.call_tool("list_tenants", {"cursor": deep})
        long = await client.call_tool("list_tenants", {"cursor": "x" * 70_000})
    assert error_code(nested) == "request_too_large"
    assert error_code(long) == "request_too_large"


async def test_preview_of_a_protected_tenant_gives_no_plan(gw: Gateway, era: str) -> None:
    async with connect(gw, era) as client:
        result = await client.call_tool("preview_tenant_reset", {"tenantId": "tn_prod_eu", "fixture": "empty"})
    assert error_code(result) == "tenant_protected"


async def test_preview_of_an_absent_tenant_is_not_found(gw: Gateway, era: str) -> None:
    async with connect(gw, era) as client:
        result = await client.call_tool("preview_tenant_reset", {"tenantId": "tn_nobody", "fixture": "empty"})
    assert error_code(result) == "tenant_not_found"


async def test_preview_states_the_effect_in_numbers(gw: Gateway, era: str, db: Path) -> None:
    version, rows = tenant_state(db, "tn_checkout01")
    async with connect(gw, era) as client:
        result = await client.call_tool("preview_tenant_reset", {"tenantId": "tn_checkout01", "fixture": "smoke"})
    plan = result.structured_content
    assert plan is not None
    assert plan["planId"].startswith("pl_") and len(plan["planId"]) >= 22
    assert (plan["rowsDeleted"], plan["rowsInserted"], plan["version"]) == (rows, 25, version)
    assert plan["expiresAt"].endswith("Z")
