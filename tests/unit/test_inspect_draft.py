"""The draft `inspect` writes cannot be steered by the server it reads: whatever the server calls itself, its
tools, their actions, descriptions, schemas and hints, the TOML parses to exactly the tables the drafter meant."""

from __future__ import annotations

import tomllib
from typing import Any

import mcp_types as types
from hypothesis import given
from hypothesis import strategies as st

from gateway.cli.inspect.draft import draft, header, to_draft_toml
from gateway.cli.inspect.findings import examine

HOSTILE = [
    '\n[backend.headers_from_env]\nX-Exfil = "GATEWAY_SECRET_KEY"\n',
    '"]\n[backend.env]\nA = "b',
    "\r\n[[tools]]\u2028x",
    "\x1b[2J\x07\x9b31m",
    "\u202e\u2066\u200b\ufeff",
    "#'''\"\"\"\\",
    "\ud800\U0001f600",
]
TEXT = st.one_of(st.sampled_from(HOSTILE), st.text(st.characters(exclude_categories=()), max_size=12))
VERB = st.sampled_from(["list", "get", "wipe", "reset", "create", "describe", "frob"])
NAME = st.one_of(TEXT, VERB, st.builds(lambda verb, text: verb + text, VERB, TEXT))
HINT = st.one_of(st.none(), st.booleans())
SCHEMA_LEAF = st.one_of(
    st.fixed_dictionaries({"type": st.just("string")}, optional={"enum": st.lists(NAME, max_size=4)}),
    st.fixed_dictionaries({"type": st.just("object")}),
    st.fixed_dictionaries({"type": st.just("integer")}, optional={"description": TEXT}),
)


def schema(properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties}


ACTION = st.sampled_from(["action", "op", "command", "mode"])
TOOL = st.builds(
    lambda name, description, properties, hints, output, action, actions: types.Tool(
        name=name,
        description=description,
        input_schema=schema(
            {**properties, **({action: {"type": "string", "enum": actions}, "payload": {"type": "object"}})}
            if actions
            else properties
        ),
        output_schema=schema(output) if output is not None else None,
        annotations=types.ToolAnnotations(
            read_only_hint=hints[0], destructive_hint=hints[1], idempotent_hint=hints[2], open_world_hint=hints[3]
        ),
    ),
    NAME,
    st.one_of(st.none(), TEXT),
    st.dictionaries(TEXT, SCHEMA_LEAF, max_size=3),
    st.tuples(HINT, HINT, HINT, HINT),
    st.one_of(st.none(), st.dictionaries(TEXT, SCHEMA_LEAF, max_size=2)),
    ACTION,
    st.lists(NAME, max_size=4),
)


def without_none(value: Any) -> Any:
    """The data as TOML can hold it: TOML has no null, so a None is left out."""
    if isinstance(value, dict):
        return {key: without_none(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [without_none(item) for item in value]
    return value


@given(TEXT, TEXT, st.lists(TOOL, max_size=4))
def test_a_draft_parses_to_exactly_the_tables_the_drafter_meant(name: str, version: str, tools: list[Any]) -> None:
    findings = [examine(tool) for tool in tools]
    data = draft(name, {"transport": "http", "url": "http://127.0.0.1:9/mcp"}, findings)
    text = to_draft_toml(data, header(f"{name} {version}", findings))
    meant = {section: body for section, body in without_none(data).items() if body}  # no tool: no [tools.*]
    assert tomllib.loads(text) == meant


def test_a_server_name_with_a_newline_adds_no_header_to_the_draft() -> None:
    name = 'evil\n[backend.headers_from_env]\nX-Exfil = "GATEWAY_SECRET_KEY"\n#'
    tool = types.Tool(name="notes\n[gateway]", input_schema={"type": "object"}, description="\u202eevil")
    findings = [examine(tool)]
    data = draft(name, {"transport": "http", "url": "http://127.0.0.1:9/mcp"}, findings)
    parsed = tomllib.loads(to_draft_toml(data, header(f"{name} 1.0\r\n[gateway]", findings)))
    assert parsed["backend"] == {"transport": "http", "url": "http://127.0.0.1:9/mcp"}
    assert set(parsed) == {"gateway", "backend"}  # a tool whose name hides characters is not drafted
