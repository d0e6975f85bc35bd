"""The draft `inspect` writes cannot be steered by the server it reads: whatever the server calls itself, its
tools, their actions, descriptions, schemas and hints, the TOML parses to exactly the tables the drafter meant."""

from __future__ import annotations

import tomllib
from typing import Any

import mcp_types as types
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.cli.inspect.draft import draft, header, to_draft_toml
from gateway.cli.inspect.findings import examine
from gateway.config import ConfigError, parse_config

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


LIKELY = st.builds(
    lambda name, description, hints: types.Tool(
        name=name,
        description=description,
        input_schema=schema({"id": {"type": "string"}}),
        output_schema=schema({}),
        annotations=types.ToolAnnotations(
            read_only_hint=hints[0], destructive_hint=hints[1], idempotent_hint=hints[2], open_world_hint=hints[3]
        ),
    ),
    st.sampled_from(["read_file", "flush_cache", "delete_entities", "move_file", "read_graph"]),
    TEXT,
    st.tuples(st.booleans(), st.booleans(), st.booleans(), st.booleans()),
)
"""A tool such as real servers have: a plain name, every hint stated, an outputSchema."""
TOOLS = st.lists(st.one_of(TOOL, LIKELY), max_size=4)


def without_none(value: Any) -> Any:
    """The data as TOML can hold it: TOML has no null, so a None is left out."""
    if isinstance(value, dict):
        return {key: without_none(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [without_none(item) for item in value]
    return value


@given(TEXT, TEXT, TOOLS)
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


@given(TEXT, TOOLS)
def test_every_passthrough_entry_of_a_draft_holds_its_hints_as_questions(name: str, tools: list[Any]) -> None:
    data = draft(name, {"transport": "http", "url": "http://127.0.0.1:9/mcp"}, [examine(tool) for tool in tools])
    for entry in data["tools"].values():
        if entry["kind"] == "passthrough":
            assert entry["annotations"]["read_only"].startswith("TODO")
            assert entry["annotations"]["destructive"].startswith("TODO")
    if data["tools"]:
        with pytest.raises(ConfigError):  # nothing is decided for the operator: no draft loads untouched
            parse_config(data)


EVERY_HINT_READ_ONLY = types.ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
OUTPUT = {"type": "object", "properties": {"flushed": {"type": "integer"}}}


def passthrough_of(tool: types.Tool) -> dict[str, Any]:
    data = draft("srv", {"transport": "stdio", "command": "srv"}, [examine(tool)])
    entry: dict[str, Any] = data["tools"][tool.name]
    return entry


def test_a_tool_that_claims_every_read_only_hint_is_a_read_to_confirm_not_a_decision() -> None:
    tool = types.Tool(
        name="flush_cache",
        input_schema={"type": "object"},
        output_schema=OUTPUT,
        annotations=EVERY_HINT_READ_ONLY,
    )
    entry = passthrough_of(tool)
    assert "claims readOnlyHint: true" in entry["annotations"]["read_only"]
    assert "claims destructiveHint: false" in entry["annotations"]["destructive"]
    with pytest.raises(ConfigError) as raised:
        parse_config(draft("srv", {"transport": "stdio", "command": "srv"}, [examine(tool)]))
    assert "tools.flush_cache.annotations.read_only: still a TODO" in str(raised.value)


def test_a_read_only_tool_that_leaves_the_other_hints_out_is_drafted_not_hidden() -> None:
    hints = types.ToolAnnotations(read_only_hint=True, open_world_hint=False)
    entry = passthrough_of(
        types.Tool(name="read_file", input_schema={"type": "object"}, output_schema=OUTPUT, annotations=hints)
    )
    assert entry["annotations"]["open_world"] is False
    assert entry["annotations"]["idempotent"].startswith("TODO")
    assert "read_only" in entry["annotations"]


def test_a_tool_that_states_no_hint_and_no_output_schema_is_held_for_every_decision() -> None:
    entry = passthrough_of(types.Tool(name="vacuum", input_schema={"type": "object"}))
    assert "states no readOnlyHint" in entry["annotations"]["read_only"]
    assert entry["output_schema"].startswith("TODO")


def test_a_tool_that_takes_an_action_is_not_drafted_as_a_passthrough() -> None:
    tool = types.Tool(
        name="admin",
        input_schema={"type": "object", "properties": {"op": {"type": "string"}}},
        output_schema=OUTPUT,
        annotations=EVERY_HINT_READ_ONLY,
    )
    found = examine(tool)
    assert draft("srv", {"transport": "stdio", "command": "srv"}, [found])["tools"] == {}
    assert any("admin: not drafted" in line and '"op"' in line for line in header("srv", [found]))


DBHUB_TOOLS = [
    types.Tool(
        name="execute_sql",
        description="Execute SQL queries on the database",
        input_schema=schema(
            {"sql": {"type": "string", "description": "SQL to execute (multiple statements separated by ;)"}}
        ),
    ),
    types.Tool(name="search_objects", input_schema=schema({"pattern": {"type": "string"}}), output_schema=schema({})),
]
ANSWERED = {
    "statements.execute_sql.read_tool": None,
    "statements.execute_sql.dialect": "postgres",
    "statements.execute_sql.answers": "dbhub",
    "statements.execute_sql.tables": ["tenants", "rows"],
    "tools.execute_statement.classes": ["delete"],
}


def test_a_tool_that_executes_sql_is_drafted_as_statement_tools_with_its_decisions_left_to_a_person() -> None:
    findings = [examine(tool) for tool in DBHUB_TOOLS]
    assert findings[0].statement is not None and findings[0].statement.argument == "sql"
    text = to_draft_toml(draft("dbhub", {"command": "dbhub"}, findings), header("dbhub", findings))
    data = tomllib.loads(text)
    assert data["statements"]["execute_sql"]["tool"] == "execute_sql"
    assert data["statements"]["execute_sql"]["argument"] == "sql"
    assert {name: tool["kind"] for name, tool in data["tools"].items() if name != "search_objects"} == {
        "query": "statement_query",
        "preview_statement": "statement_preview",
        "execute_statement": "statement_execute",
    }
    with pytest.raises(ConfigError) as refused:
        parse_config(data)
    undecided = {line.strip().split(":")[0] for line in str(refused.value).splitlines()[1:]}
    assert undecided >= set(ANSWERED)
    for key, value in ANSWERED.items():
        section, name, field = key.split(".")
        if value is None:
            del data[section][name][field]
        else:
            data[section][name][field] = value
    del data["tools"]["search_objects"]
    config = parse_config(data)
    assert config.statements["execute_sql"].dialect == "postgres"


@pytest.mark.parametrize(
    ("tool", "argument"),
    [
        (
            types.Tool(
                name="execute_query",
                description="Execute a SQL query",
                input_schema=schema({"query": {"type": "string"}, "params": {"type": "object"}}),
            ),
            "query",
        ),
        (
            types.Tool(
                name="run", description="Runs a SQL statement", input_schema=schema({"text": {"type": "string"}})
            ),
            "text",
        ),
        (
            types.Tool(name="db", input_schema=schema({"statement": {"type": "string", "description": "the SQL"}})),
            "statement",
        ),
        (
            types.Tool(
                name="search", description="Search the docs", input_schema=schema({"query": {"type": "string"}})
            ),
            None,
        ),
        (types.Tool(name="run", description="Runs a job", input_schema=schema({"text": {"type": "string"}})), None),
    ],
)
def test_a_statement_tool_is_told_by_its_argument_or_its_description(tool: types.Tool, argument: str | None) -> None:
    found = examine(tool).statement
    assert (found.argument if found is not None else None) == argument
