"""No config re-publishes a god-tool: a pass-through of the tool the planned tools wrap, or of any tool that takes an
action or command argument, is refused with a sentence naming it; the one way past is a loudly named override
that makes every call a confirmed, keyed and audited write, and ``check`` says so."""

from __future__ import annotations

from typing import Any

import mcp_types as types
import pytest

from gateway.catalog.published import build_catalog
from gateway.config import ConfigError, load_config, parse_config

READ_ONLY = {"read_only": True, "destructive": False, "idempotent": True, "open_world": False}
WRITES = {**READ_ONLY, "read_only": False, "destructive": True, "idempotent": False}
OVERRIDE = "unsafe_republish_god_tool"
FIXTURES = {"fixtures": {"empty": 0}}


def with_tool(name: str, **entry: Any) -> dict[str, Any]:
    data = load_config().model_dump(exclude_none=True)
    data["tools"][name] = {"kind": "passthrough", "annotations": READ_ONLY, **entry}
    return data


def test_the_wrapped_god_tool_passed_through_is_refused_naming_it() -> None:
    with pytest.raises(ConfigError) as raised:
        parse_config(with_tool("tenant_admin", source="manage_tenant"))
    assert "tools.tenant_admin.source" in str(raised.value)
    assert "manage_tenant" in str(raised.value)


def test_the_god_tool_under_its_own_name_is_refused_too() -> None:
    with pytest.raises(ConfigError) as raised:
        parse_config(with_tool("manage_tenant"))
    assert "tools.manage_tenant" in str(raised.value)


def test_the_override_needs_every_call_confirmed_and_check_shows_it() -> None:
    with pytest.raises(ConfigError) as raised:
        parse_config(with_tool("tenant_admin", source="manage_tenant", **{OVERRIDE: True}))
    assert f"tools.tenant_admin: {OVERRIDE} needs annotations.read_only = false" in str(raised.value)
    config = parse_config(with_tool("tenant_admin", source="manage_tenant", annotations=WRITES, **{OVERRIDE: True}))
    assert config.tools["tenant_admin"].writes
    [warning] = config.republished_god_tools()  # check prints it as a WARN, serve logs it
    assert "tools.tenant_admin" in warning and OVERRIDE in warning


def listing(properties: dict[str, Any]) -> list[types.Tool]:
    schema = {"type": "object", "properties": properties}
    output = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
    return [types.Tool(name="admin", input_schema=schema, output_schema=output)]


@pytest.mark.parametrize(
    "properties",
    [
        {"action": {"type": "string"}},
        {"op": {"type": "string"}, "args": {"type": "object"}},
        {"command": {"type": "string"}},
        {"operation": {"type": "string"}},
        {"method": {"type": "string"}},
        {"kind": {"type": "string", "enum": ["list", "get", "wipe"]}},
    ],
    ids=["action", "op", "command", "operation", "method", "verbs-enum"],
)
def test_a_backend_tool_that_takes_an_action_is_not_published(properties: dict[str, Any]) -> None:
    config = parse_config(with_tool("admin"))
    catalog = build_catalog(config, FIXTURES, {"default": listing(properties)})
    assert "admin" not in catalog.tools
    misfit = catalog.misfits["admin"]
    assert misfit.key == "tools.admin.source" and "admin" in misfit.sentence


@pytest.mark.parametrize(
    "properties",
    [
        {"path": {"type": "string"}},
        {"order": {"type": "string", "enum": ["asc", "desc"]}},
        {"reason": {"type": "string"}},
    ],
)
def test_an_ordinary_tool_is_published(properties: dict[str, Any]) -> None:
    config = parse_config(with_tool("admin"))
    assert "admin" in build_catalog(config, FIXTURES, {"default": listing(properties)}).tools


def test_the_override_publishes_an_action_taking_tool_as_a_confirmed_write() -> None:
    config = parse_config(with_tool("admin", annotations=WRITES, **{OVERRIDE: True}))
    catalog = build_catalog(config, FIXTURES, {"default": listing({"action": {"type": "string"}})})
    assert catalog.tools["admin"].config.writes
