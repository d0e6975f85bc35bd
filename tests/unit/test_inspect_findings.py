"""What `inspect` reads from tool definitions alone: hints left to defaults, free-form objects, god-tools."""

from __future__ import annotations

from typing import Any

import mcp_types as types
import pytest

from gateway.cli.inspect.draft import draft
from gateway.cli.inspect.findings import examine
from gateway.config import ConfigError, parse_config
from gateway.config.godtool import risk_of


def tool(input_schema: dict[str, Any], description: str = "", **extra: Any) -> types.Tool:
    schema = {"type": "object", **input_schema}
    return types.Tool(name="manage_box", description=description, input_schema=schema, **extra)


@pytest.mark.parametrize(
    ("action", "risk"),
    [
        ("list", "read"),
        ("flags.get", "read"),
        ("describeDatabase", "read"),
        ("set_rollout", "write"),
        ("reseed", "destructive"),
        ("list_and_purge", "destructive"),
        ("templates", "unknown"),
    ],
)
def test_an_actions_risk_is_read_from_its_verbs(action: str, risk: str) -> None:
    assert risk_of(action) == risk


def test_a_tool_without_annotations_leaves_every_hint_to_the_spec_defaults() -> None:
    found = examine(tool({"properties": {"x": {"type": "string"}}}))
    assert found.implicit_hints == {
        "readOnlyHint": False,
        "destructiveHint": True,
        "idempotentHint": False,
        "openWorldHint": True,
    }
    partial = examine(tool({}, annotations=types.ToolAnnotations(read_only_hint=True)))
    assert set(partial.implicit_hints) == {"destructiveHint", "idempotentHint", "openWorldHint"}
    assert partial.claims_read_only and partial.passable  # a read to confirm, not hidden


@pytest.mark.parametrize(
    ("schema", "free"),
    [
        ({"type": "object"}, True),
        ({"type": "object", "properties": {"a": {}}, "additionalProperties": True}, True),
        ({"anyOf": [{"type": "object", "additionalProperties": True}, {"type": "null"}]}, True),
        ({"type": "object", "properties": {"a": {}}, "additionalProperties": False}, False),
        ({"type": "string"}, False),
    ],
)
def test_a_free_form_object_argument_is_named(schema: dict[str, Any], free: bool) -> None:
    assert examine(tool({"properties": {"data": schema}})).free_form == (["data"] if free else [])


def test_a_god_tool_is_found_from_its_action_argument_and_described_actions() -> None:
    found = examine(
        tool(
            {"properties": {"cmd": {"type": "string"}, "args": {"type": "object"}}},
            "Admin. cmd: list | show | purge. args: per command.",
        )
    )
    assert found.god is not None
    assert found.god.action_argument == "cmd" and found.god.payload_argument == "args"
    assert found.god.actions == {"list": "read", "show": "read", "purge": "destructive"}
    assert not found.god.enumerated


def test_an_action_like_string_alone_is_not_a_god_tool() -> None:
    assert examine(tool({"properties": {"mode": {"type": "string"}, "op": {"type": "string"}}})).god is None


def test_a_draft_is_refused_until_every_todo_is_answered() -> None:
    found = examine(
        tool(
            {
                "properties": {
                    "action": {"type": "string", "enum": ["list", "get", "wipe"]},
                    "payload": {"type": "object"},
                }
            }
        )
    )
    data = draft("srv", {"transport": "stdio", "command": "srv"}, [found])
    assert set(data["tools"]) == {"list_boxes", "preview_wipe_box", "wipe_box"}
    assert data["backend"] == {
        "transport": "stdio",
        "command": "srv",
        "tool": "manage_box",
        "action_argument": "action",
        "payload_argument": "payload",
    }
    with pytest.raises(ConfigError) as raised:
        parse_config(data)
    assert "tools.wipe_box.call.payload: still a TODO of the draft" in str(raised.value)
