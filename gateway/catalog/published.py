"""The published tools: names, annotations, strict input schemas and bounded output schemas, from config.

The low-level MCP server validates nothing, so each tool carries compiled validators for both directions:
a compiled validator (gateway.catalog.schemas) that answers valid / not valid, and ``jsonschema`` for what it
cannot compile and for the message when a check fails. ``fits`` checks one field of a tool's output on its own,
so that values from the backend (a version, a summary number, an id) are checked where they enter, before they are
planned, recorded or returned.

Some schemas need the backends: an input enum read from a lookup, a pass-through tool's schemas from its
backend's ``tools/list``. A ``Catalog`` holds the tools that could be built and, for the others, why not (their
backend is down, or a pass-through tool does not fit what its backend offers): a backend that is down takes
only its own tools away.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types
from jsonschema import FormatChecker
from jsonschema.protocols import Validator

from gateway.catalog.schemas import Check, SchemaValidator, compile_check, published
from gateway.config import GatewayConfig, Limits, PassthroughTool, PreviewTool, ReadTool, ToolConfig, WriteTool
from gateway.config.expressions import names_in
from gateway.errors import Code, ToolError
from gateway.text import is_plain, quoted

log = logging.getLogger(__name__)

IDEMPOTENCY_KEY = {"type": "string", "pattern": "^[A-Za-z0-9_.:-]{8,128}$"}
PLAN_ID = {"type": "string", "pattern": "^pl_[A-Za-z0-9_-]{16,64}$"}
CURSOR = {"type": "string", "minLength": 1, "maxLength": 512}


@dataclass(frozen=True)
class PublishedTool:
    """One tool as clients see it, with its config and validators."""

    name: str
    config: ToolConfig
    tool: types.Tool
    inputs: Validator
    outputs: Validator
    inputs_valid: Check | None = None
    outputs_valid: Check | None = None
    field_checks: dict[str, Check] = field(default_factory=dict)

    def validate_arguments(self, arguments: dict[str, Any]) -> None:
        """Raise invalid_arguments naming the first problem; nothing is coerced."""
        if self.inputs_valid is not None and self.inputs_valid(arguments):
            return
        error = next(iter(sorted(self.inputs.iter_errors(arguments), key=lambda e: list(e.path))), None)
        if error is not None:
            where = "/".join(str(part) for part in error.absolute_path) or "arguments"
            raise ToolError(
                Code.INVALID_ARGUMENTS,
                f"{self.name}: {where}: {_short(error.message)}. Fix the arguments to match the inputSchema.",
            )

    def validate_output(self, body: dict[str, Any]) -> None:
        """Raise ValueError when a structured result does not match the declared outputSchema."""
        if self.outputs_valid is not None and self.outputs_valid(body):
            return
        error = next(iter(self.outputs.iter_errors(body)), None)
        if error is not None:
            raise ValueError(f"{self.name} output does not match its outputSchema: {_short(error.message)}")

    def fits(self, name: str, value: Any) -> bool:
        """Whether one field of this tool's output may hold ``value`` (a field the output does not declare: no)."""
        check = self.field_checks.get(name)
        return check is not None and check(value)


class Misfit(Exception):
    """A pass-through tool does not fit what its backend offers; ``key`` names the config key to change."""

    def __init__(self, key: str, sentence: str) -> None:
        super().__init__(f"{key}: {sentence}")
        self.key = key
        self.sentence = sentence


@dataclass(frozen=True)
class Catalog:
    """The tools that are published now, and why each other configured tool is not."""

    tools: dict[str, PublishedTool]
    unavailable: dict[str, ToolError] = field(default_factory=dict)
    misfits: dict[str, Misfit] = field(default_factory=dict)


def needs(config: GatewayConfig, name: str) -> list[str]:
    """What a tool's schemas are built from: ``lookups.NAME`` (input enums) and ``backends.NAME`` (a pass-through
    tool's definition on its backend)."""
    tool = config.tools[name]
    if isinstance(tool, PassthroughTool):
        return [f"backends.{config.backend_of(name)}"]
    preview = (
        tool if isinstance(tool, PreviewTool) else config.preview_of(tool) if isinstance(tool, WriteTool) else None
    )
    if preview is None:
        return []
    return [f"lookups.{field.enum_from}" for field in preview.inputs.values() if field.enum_from is not None]


def build_catalog(
    config: GatewayConfig,
    lookups: Mapping[str, Mapping[str, Any]],
    listings: Mapping[str, list[types.Tool]] | None = None,
    failures: Mapping[str, ToolError] | None = None,
) -> Catalog:
    """Every configured tool that can be built, ready to list and validate against. ``lookups`` supplies enum values,
    ``listings`` each backend's own tools; ``failures`` says which of those could not be read, and why."""
    tools, unavailable, misfits = {}, {}, {}
    for name in config.tools:
        failed = [(failures or {})[need] for need in needs(config, name) if need in (failures or {})]
        if failed:
            unavailable[name] = failed[0]
            continue
        try:
            tools[name] = publish(config, name, lookups, listings or {})
        except Misfit as misfit:
            log.error("%s is not published: %s", name, misfit)
            misfits[name] = misfit
            unavailable[name] = ToolError(
                Code.BACKEND_ERROR, f"{name} does not fit what its backend offers; the operator must fix its config."
            )
    return Catalog(tools, unavailable, misfits)


def publish(
    config: GatewayConfig,
    name: str,
    lookups: Mapping[str, Mapping[str, Any]],
    listings: Mapping[str, list[types.Tool]],
) -> PublishedTool:
    """One configured tool as clients see it, with its validators (Misfit for a pass-through tool that does not fit)."""
    tool_config = config.tools[name]
    if isinstance(tool_config, PassthroughTool):
        tool = _passthrough(name, tool_config, listings[config.backend_of(name)])
    else:
        input_schema, output_schema = (published(schema) for schema in _schemas(config, tool_config, lookups))
        tool = types.Tool(
            name=name,
            title=tool_config.title,
            description=tool_config.description,
            input_schema=input_schema,
            output_schema=output_schema,
            annotations=_annotations(tool_config),
        )
    assert tool.output_schema is not None
    formats = FormatChecker()
    input_schema, output_schema = dict(tool.input_schema), dict(tool.output_schema)
    return PublishedTool(
        name=name,
        config=tool_config,
        tool=tool,
        inputs=SchemaValidator(input_schema, format_checker=formats),
        outputs=SchemaValidator(output_schema, format_checker=formats),
        inputs_valid=compile_check(input_schema, formats),
        outputs_valid=compile_check(output_schema, formats),
        field_checks={name: _check(schema, formats) for name, schema in output_schema.get("properties", {}).items()},
    )


def _passthrough(name: str, config: PassthroughTool, listing: list[types.Tool]) -> types.Tool:
    """A backend's own tool under the operator's name, hints and schemas. A tool that writes gets the gateway's
    ``idempotencyKey`` input and ``replayed`` output."""
    source = config.source_name(name)
    found = next((tool for tool in listing if tool.name == source), None)
    if found is None:
        raise Misfit(
            f"tools.{name}.source", f"the backend has no tool {source!r}; it has {sorted(t.name for t in listing)}"
        )
    if config.input_schema is not None:
        inputs = dict(config.input_schema)
    else:  # strict, like every published tool: only the arguments the backend declares are passed on
        inputs = {**found.input_schema, "additionalProperties": False}
    outputs = config.output_schema if config.output_schema is not None else found.output_schema
    if outputs is None:
        raise Misfit(f"tools.{name}.output_schema", f"{source} declares no outputSchema; state one here")
    if inputs.get("type") != "object" or outputs.get("type") != "object":
        raise Misfit(f"tools.{name}.source", f"{source}'s schemas are not of type 'object'")
    properties = inputs.get("properties", {})
    if config.writes:
        inputs = _with_property(name, inputs, "idempotencyKey", IDEMPOTENCY_KEY, "input_schema")
        outputs = _with_property(name, outputs, "replayed", {"type": "boolean"}, "output_schema")
    if config.target_argument is not None and config.target_argument not in properties:
        raise Misfit(f"tools.{name}.target_argument", f"{source} has no argument {config.target_argument!r}")
    unknown = names_in(config.message or "") - {"tool", "arguments", *properties}
    if unknown:
        raise Misfit(f"tools.{name}.message", f"uses {{{sorted(unknown)[0]}}}, which is not an argument of {source}")
    hints = config.annotations
    title = config.title or found.title
    return types.Tool(
        name=name,
        title=title,
        description=config.description or found.description,
        input_schema=published(inputs),
        output_schema=published(outputs),
        annotations=types.ToolAnnotations(
            title=title,
            read_only_hint=hints.read_only,
            destructive_hint=hints.destructive,
            idempotent_hint=hints.idempotent,
            open_world_hint=hints.open_world,
        ),
    )


def _with_property(name: str, schema: dict[str, Any], prop: str, prop_schema: Any, key: str) -> dict[str, Any]:
    properties = schema.get("properties", {})
    if prop in properties:
        raise Misfit(f"tools.{name}.{key}", f"already has a {prop!r} property, which the gateway adds itself")
    required = [*schema.get("required", []), prop]
    return {**schema, "properties": {**properties, prop: prop_schema}, "required": required}


def _check(schema: dict[str, Any], formats: FormatChecker) -> Check:
    """A compiled check, or jsonschema's answer where the schema is outside the compiled subset."""
    compiled = compile_check(schema, formats)
    return compiled if compiled is not None else SchemaValidator(schema, format_checker=formats).is_valid


def _annotations(tool: ReadTool | PreviewTool | WriteTool) -> types.ToolAnnotations:
    """All four hints, always explicit."""
    if isinstance(tool, WriteTool):
        return types.ToolAnnotations(
            title=tool.title,
            read_only_hint=False,
            destructive_hint=tool.destructive,
            idempotent_hint=True,
            open_world_hint=tool.open_world,
        )
    return types.ToolAnnotations(
        title=tool.title, read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
    )


def _schemas(
    config: GatewayConfig, tool: ReadTool | PreviewTool | WriteTool, lookups: Mapping[str, Mapping[str, Any]]
) -> tuple[dict[str, Any], dict[str, Any]]:
    if isinstance(tool, ReadTool):
        limit = {"type": "integer", "minimum": 1, "maximum": tool.max_limit, "default": tool.default_limit}
        item = _object({name: field.json_schema for name, field in tool.fields.items()})
        items = {"type": "array", "maxItems": tool.max_limit, "items": item}
        return (
            _object({"limit": limit, "cursor": CURSOR}, required=[]),
            _object({tool.items_key: items, "nextCursor": CURSOR}, required=[tool.items_key]),
        )
    preview = tool if isinstance(tool, PreviewTool) else config.preview_of(tool)
    inputs = {
        name: _input_schema(field.json_schema, field.enum_from, lookups) for name, field in preview.inputs.items()
    }
    plan_fields = {
        "planId": PLAN_ID,
        **inputs,
        **{name: field.json_schema for name, field in preview.summary.items()},
        preview.target.version_output: preview.target.version_schema,
    }
    always = [name for name in plan_fields if name not in preview.inputs or preview.inputs[name].required]
    if isinstance(tool, PreviewTool):
        required_inputs = [name for name, field in tool.inputs.items() if field.required]
        expires = {"type": "string", "format": "date-time"}
        approval = _object({"mode": {"enum": ["form", "typed", "url"]}, "rule": {"type": ["string", "null"]}})
        outputs = _object(
            {**plan_fields, "expiresAt": expires, "approval": approval}, required=[*always, "expiresAt", "approval"]
        )
        return _object(inputs, required=required_inputs), outputs
    write_inputs = _object({"planId": PLAN_ID, "idempotencyKey": IDEMPOTENCY_KEY})
    outputs = _object({**plan_fields, "replayed": {"type": "boolean"}}, required=[*always, "replayed"])
    return write_inputs, outputs


def named_version(body: dict[str, Any], name: str) -> dict[str, Any]:
    """A preview's or a write's answer with its version under the configured output name (``target.version_output``,
    the same for both). Plans and idempotency records keep it as ``version``: only what a client sees is renamed."""
    if name == "version" or "version" not in body:
        return body
    return {name if key == "version" else key: value for key, value in body.items()}


def _input_schema(
    schema: dict[str, Any], enum_from: str | None, lookups: Mapping[str, Mapping[str, Any]]
) -> dict[str, Any]:
    if enum_from is None:
        return schema
    return {**schema, "enum": offered(enum_from, lookups[enum_from])}


def offered(lookup: str, table: Mapping[str, Any]) -> list[str]:
    """The keys of a lookup a caller may choose: only names a person can read as they are (gateway/text.py).
    A key with control, bidi or format characters is the backend trying to make a prompt say something else."""
    hostile = [key for key in table if not is_plain(key)]
    if hostile:
        log.warning(
            "lookup %s: %d name(s) with invisible characters are not offered, e.g. %s",
            lookup,
            len(hostile),
            quoted(hostile[0], 80),
        )
    return sorted(key for key in table if is_plain(key))


def _object(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties) if required is None else required,
        "additionalProperties": False,
    }


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def refuse_oversized(arguments: Any, limits: Limits) -> None:
    """Refuse arguments past the configured caps with request_too_large, before any other work."""
    max_depth, max_elements, max_string_bytes = limits.max_depth, limits.max_elements, limits.max_string_bytes
    elements = 0
    stack: list[tuple[Any, int]] = [(arguments, 1)]
    while stack:
        value, depth = stack.pop()
        elements += 1
        if depth > max_depth or elements > max_elements:
            raise ToolError(Code.REQUEST_TOO_LARGE, "The arguments are nested too deeply or have too many elements.")
        if isinstance(value, str) and len(value.encode("utf-8", "surrogatepass")) > max_string_bytes:
            raise ToolError(Code.REQUEST_TOO_LARGE, "A string in the arguments is longer than the gateway accepts.")
        if isinstance(value, dict):
            stack.extend((item, depth + 1) for item in value.values())
            stack.extend((key, depth + 1) for key in value)
        elif isinstance(value, list):
            stack.extend((item, depth + 1) for item in value)
