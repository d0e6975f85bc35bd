"""What a server's tool definitions say, read from ``tools/list`` alone (no tool is called).

For every tool: which hints it states (claims, which a draft asks the operator to confirm) and which it leaves to
the MCP spec's defaults (and what a client then assumes), whether it has an ``outputSchema``, which arguments are
free-form objects, and whether an argument names an action (then the gateway never passes it through). For a
god-tool (an argument that names an action, and actions of different risk in its enum or description): its
actions, each classed by its verb (gateway.config.godtool) as ``read``, ``write``, ``destructive`` or
``unknown``. A verb none of the lists knows is ``unknown``: such an action is never drafted as a call, since it
may change things.

A statement-executing tool (``StatementTool``: a string argument that carries SQL) is a god-tool of another
shape: one argument lists and deletes. It is recognised by its argument (named ``sql``, or named like a query
or statement and described as SQL) or by its description (it says it executes SQL, or a query or statement,
and takes one string argument): then the draft wraps it with the statement tool kinds instead of a pass-through.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types

from gateway.config import SPEC_DEFAULTS
from gateway.config.godtool import ACTION_ARGUMENTS, Risk, action_argument, enumerated, risk_of
from gateway.text import MAX_NAME, quoted

HINT_NAMES = {
    "readOnlyHint": "read_only_hint",
    "destructiveHint": "destructive_hint",
    "idempotentHint": "idempotent_hint",
    "openWorldHint": "open_world_hint",
}


@dataclass(frozen=True)
class GodTool:
    """A tool that takes an action name and does many things, read and write."""

    action_argument: str
    payload_argument: str | None
    actions: dict[str, Risk]
    enumerated: bool
    signals: list[str]


@dataclass(frozen=True)
class StatementTool:
    """A tool that executes the SQL it is given in one string argument."""

    argument: str
    signals: list[str]


@dataclass(frozen=True)
class ToolFindings:
    """One tool, as its definition describes it."""

    name: str
    implicit_hints: dict[str, bool] = field(default_factory=dict)
    stated_hints: dict[str, bool] = field(default_factory=dict)
    output_schema: bool = False
    free_form: list[str] = field(default_factory=list)
    god: GodTool | None = None
    action_argument: str | None = None
    """What makes it a god-tool to the gateway, which never publishes it as a pass-through (gateway.config.godtool)."""
    statement: StatementTool | None = None

    @property
    def passable(self) -> bool:
        """Whether it is drafted as a pass-through: it takes no action or command argument, and no SQL."""
        return self.god is None and self.action_argument is None and self.statement is None

    @property
    def claims_read_only(self) -> bool:
        """Whether it states ``readOnlyHint: true`` (a claim: the draft asks the operator to confirm it)."""
        return self.stated_hints.get("readOnlyHint") is True


def examine(tool: types.Tool) -> ToolFindings:
    """The findings for one tool definition."""
    stated = _stated_hints(tool.annotations)
    implicit = {hint: default for hint, default in SPEC_DEFAULTS.items() if hint not in stated}
    properties = tool.input_schema.get("properties", {})
    free_form = [name for name, schema in properties.items() if _free_form(schema)]
    return ToolFindings(
        name=tool.name,
        implicit_hints=implicit,
        stated_hints=stated,
        output_schema=tool.output_schema is not None,
        free_form=free_form,
        god=_god_tool(tool, properties, free_form),
        action_argument=action_argument(tool.input_schema),
        statement=statement_tool(tool),
    )


SQL_WORDS = re.compile(r"\bsql\b", re.IGNORECASE)
STATEMENT_ARGUMENTS = ("query", "statement", "stmt")
RUNS_SQL = re.compile(r"\b(?:execute|run)s?\b[^.]{0,40}\b(?:sql|quer(?:y|ies)|statements?)\b", re.IGNORECASE)


def statement_tool(tool: types.Tool) -> StatementTool | None:
    """The string argument that carries SQL, and what says so; None for a tool that takes none."""
    properties = tool.input_schema.get("properties")
    if not isinstance(properties, Mapping):
        return None
    strings = {
        name: schema
        for name, schema in properties.items()
        if isinstance(name, str) and isinstance(schema, Mapping) and schema.get("type") == "string"
    }
    described = SQL_WORDS.search(tool.description or "") is not None
    for name, schema in strings.items():
        words = f"{schema.get('title', '')} {schema.get('description', '')}"
        if "sql" in name.lower():
            return StatementTool(name, [f"argument {quoted(name, MAX_NAME)} is named for SQL"])
        if name.lower() in STATEMENT_ARGUMENTS and (SQL_WORDS.search(words) or described):
            return StatementTool(name, [f"argument {quoted(name, MAX_NAME)} carries what it describes as SQL"])
    runs = RUNS_SQL.search(tool.description or "")
    if runs is not None and described and len(strings) == 1:
        (name,) = strings
        return StatementTool(name, [f"its description says it runs SQL in argument {quoted(name, MAX_NAME)}"])
    return None


def _stated_hints(annotations: types.ToolAnnotations | None) -> dict[str, bool]:
    if annotations is None:
        return {}
    stated = {}
    for hint, attribute in HINT_NAMES.items():
        value = getattr(annotations, attribute)
        if isinstance(value, bool):
            stated[hint] = value
    return stated


def _free_form(schema: Any) -> bool:
    """An object argument whose keys nobody declared (or one that also admits any extra key)."""
    if not isinstance(schema, Mapping):
        return False
    options = [schema, *schema.get("anyOf", []), *schema.get("oneOf", [])]
    return any(
        isinstance(option, Mapping)
        and option.get("type") == "object"
        and (not option.get("properties") or option.get("additionalProperties", True) is not False)
        for option in options
    )


def _god_tool(tool: types.Tool, properties: Mapping[str, Any], free_form: list[str]) -> GodTool | None:
    argument = next((name for name in ACTION_ARGUMENTS if name in properties), None)
    if argument is None:
        return None
    listed = enumerated(tool.input_schema, argument)
    names = listed if listed is not None else _listed_in_description(tool.description or "", argument)
    risks = {name: risk_of(name) for name in names}
    signals = [f"argument {quoted(argument)} names an action"]
    kinds = sorted({risk for risk in risks.values() if risk != "unknown"})
    if len(kinds) > 1:
        where = "enum" if listed is not None else "description"
        signals.append(f"its {where} lists actions of different risk ({', '.join(kinds)})")
    if free_form:
        signals.append(f"free-form payload argument {quoted(free_form[0], MAX_NAME)}")
    if len(signals) < 2:
        return None  # one signal alone (say an 'op' string) is not enough to call it a god-tool
    payload = next((name for name in free_form if name != argument), None)
    return GodTool(argument, payload, risks, listed is not None, signals)


def _listed_in_description(description: str, argument: str) -> list[str]:
    """Actions a description lists after the argument's name: ``action: list | get | reseed``."""
    match = re.search(rf"\b{re.escape(argument)}\s*[:=]\s*([\w.\-]+(?:\s*[|,/]\s*[\w.\-]+)+)", description)
    if match is None:
        return []
    return [name.strip(".") for name in re.split(r"\s*[|,/]\s*", match.group(1)) if name.strip(".")]
