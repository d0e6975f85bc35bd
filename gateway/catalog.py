"""The published tools: names, annotations, strict input schemas and bounded output schemas, from config.

The low-level MCP server validates nothing, so each tool carries compiled validators for both directions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import mcp.types as types
from jsonschema import Draft202012Validator, FormatChecker

from gateway.config import GatewayConfig, PreviewTool, ReadTool, ToolConfig, WriteTool
from gateway.errors import ToolError

TENANT_ID = {"type": "string", "pattern": "^[A-Za-z0-9_.-]{1,64}$"}
IDEMPOTENCY_KEY = {"type": "string", "pattern": "^[A-Za-z0-9_.:-]{8,128}$"}
PLAN_ID = {"type": "string", "pattern": "^pl_[A-Za-z0-9_-]{16,64}$"}
COUNT = {"type": "integer", "minimum": 0}
VERSION = {"type": "integer", "minimum": 0}

TENANT = {
    "type": "object",
    "properties": {
        "id": {"type": "string", "maxLength": 64},
        "name": {"type": "string", "maxLength": 256},
        "rows": COUNT,
        "version": VERSION,
        "protected": {"type": "boolean"},
    },
    "required": ["id", "name", "rows", "version", "protected"],
    "additionalProperties": False,
}

READ_ONLY = types.ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
DESTRUCTIVE = types.ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
)


@dataclass(frozen=True)
class PublishedTool:
    """One tool as clients see it, with its config and validators."""

    name: str
    config: ToolConfig
    tool: types.Tool
    inputs: Draft202012Validator
    outputs: Draft202012Validator

    def check_arguments(self, arguments: dict[str, Any]) -> None:
        """Raise invalid_arguments naming the first problem; nothing is coerced."""
        error = next(iter(sorted(self.inputs.iter_errors(arguments), key=lambda e: list(e.path))), None)
        if error is not None:
            where = "/".join(str(part) for part in error.absolute_path) or "arguments"
            raise ToolError(
                "invalid_arguments",
                f"{self.name}: {where}: {_short(error.message)}. Fix the arguments to match the tool's inputSchema.",
            )

    def check_output(self, body: dict[str, Any]) -> None:
        """Raise ValueError when a structured result does not match the declared outputSchema."""
        error = next(iter(self.outputs.iter_errors(body)), None)
        if error is not None:
            raise ValueError(f"{self.name} output does not match its outputSchema: {_short(error.message)}")


def build_catalog(config: GatewayConfig, fixtures: list[str]) -> dict[str, PublishedTool]:
    """Every configured tool, ready to list and validate against."""
    catalog = {}
    for name, tool_config in config.tools.items():
        input_schema, output_schema = _schemas(tool_config, fixtures)
        annotations = DESTRUCTIVE if isinstance(tool_config, WriteTool) else READ_ONLY
        tool = types.Tool(
            name=name,
            title=tool_config.title,
            description=tool_config.description,
            input_schema=input_schema,
            output_schema=output_schema,
            annotations=annotations.model_copy(update={"title": tool_config.title}),
        )
        catalog[name] = PublishedTool(
            name=name,
            config=tool_config,
            tool=tool,
            inputs=Draft202012Validator(input_schema, format_checker=FormatChecker()),
            outputs=Draft202012Validator(output_schema, format_checker=FormatChecker()),
        )
    return catalog


def _schemas(tool: ToolConfig, fixtures: list[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    if isinstance(tool, ReadTool):
        inputs = _object(
            {
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": tool.max_limit,
                    "default": tool.default_limit,
                },
                "cursor": {"type": "string", "minLength": 1, "maxLength": 512},
            },
            required=[],
        )
        outputs = _object(
            {
                tool.items_key: {"type": "array", "maxItems": tool.max_limit, "items": TENANT},
                "nextCursor": {"type": "string"},
            },
            required=[tool.items_key],
        )
        return inputs, outputs
    plan_fields = {
        "planId": PLAN_ID,
        "tenantId": TENANT_ID,
        "fixture": {"type": "string", "enum": fixtures},
        "rowsDeleted": COUNT,
        "rowsInserted": COUNT,
        "version": VERSION,
    }
    if isinstance(tool, PreviewTool):
        inputs = _object({"tenantId": TENANT_ID, "fixture": {"type": "string", "enum": fixtures}})
        outputs = _object({**plan_fields, "expiresAt": {"type": "string", "format": "date-time"}})
        return inputs, outputs
    inputs = _object({"planId": PLAN_ID, "idempotencyKey": IDEMPOTENCY_KEY})
    outputs = _object({**plan_fields, "replayed": {"type": "boolean"}})
    return inputs, outputs


def _object(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties) if required is None else required,
        "additionalProperties": False,
    }


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def check_size(arguments: Any, *, max_depth: int, max_elements: int, max_string_bytes: int) -> None:
    """Refuse arguments past the configured caps with request_too_large, before any other work."""
    elements = 0
    stack: list[tuple[Any, int]] = [(arguments, 1)]
    while stack:
        value, depth = stack.pop()
        elements += 1
        if depth > max_depth or elements > max_elements:
            raise ToolError("request_too_large", "The arguments are nested too deeply or have too many elements.")
        if isinstance(value, str) and len(value.encode("utf-8", "surrogatepass")) > max_string_bytes:
            raise ToolError("request_too_large", "A string in the arguments is longer than the gateway accepts.")
        if isinstance(value, dict):
            stack.extend((item, depth + 1) for item in value.values())
            stack.extend((key, depth + 1) for key in value)
        elif isinstance(value, list):
            stack.extend((item, depth + 1) for item in value)
