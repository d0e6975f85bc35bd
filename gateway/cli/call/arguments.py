"""The terminal client's arguments: ``key=value`` typed by the tool's ``inputSchema``, ``key:=json`` as JSON.

``limit=5`` sends the integer 5 when the schema says ``limit`` is an integer, and the string "5" when it says
string: the person types what they mean and the schema decides, so nothing is coerced on the gateway's side.
``key:=json`` always sends the JSON value as written (``cursor:=null``, ``tags:='["a"]'``).
"""

from __future__ import annotations

import json
import re
from typing import Any

INTEGER = re.compile(r"-?\d+")
BOOLEANS = {"true": True, "false": False}


class UsageError(Exception):
    """An argument the terminal client cannot read; the message says how to write it."""


def parse_pairs(pairs: list[str], schema: dict[str, Any] | None = None) -> dict[str, Any]:
    """``key=value`` and ``key:=json`` into tool arguments, typed by ``schema`` (a tool's inputSchema)."""
    properties: dict[str, Any] = (schema or {}).get("properties") or {}
    closed = schema is not None and schema.get("additionalProperties") is False
    arguments: dict[str, Any] = {}
    for pair in pairs:
        key, equals, value = pair.partition("=")
        name = key.removesuffix(":")
        if not equals or not name:
            raise UsageError(f"{pair!r} is not key=value or key:=json")
        if closed and name not in properties:
            takes = ", ".join(properties) or "no arguments"
            raise UsageError(f"there is no argument {name!r}; this tool takes: {takes}")
        if key.endswith(":"):
            try:
                arguments[name] = json.loads(value)
            except ValueError:
                raise UsageError(f"{name}:= needs JSON, got {value!r} (use {name}={value} for text)") from None
        else:
            arguments[name] = typed(name, value, properties.get(name))
    return arguments


def typed(name: str, value: str, schema: Any) -> Any:
    """A typed word as the value its property's schema asks for (text when the schema allows text)."""
    types = _types(schema)
    if not types or "string" in types:
        return value
    if "integer" in types and INTEGER.fullmatch(value):
        return int(value)
    if "number" in types:
        try:
            return float(value) if not INTEGER.fullmatch(value) else int(value)
        except ValueError:
            pass
    if "boolean" in types and value.lower() in BOOLEANS:
        return BOOLEANS[value.lower()]
    if "null" in types and value == "null":
        return None
    if types & {"object", "array"}:
        raise UsageError(f"{name} takes JSON: write {name}:='...'")
    raise UsageError(f"{name} needs {' or '.join(sorted(types))}, got {value!r}")


def _types(schema: Any) -> set[str]:
    if not isinstance(schema, dict):
        return set()
    kind = schema.get("type")
    if isinstance(kind, str):
        return {kind}
    if isinstance(kind, list):
        return {item for item in kind if isinstance(item, str)}
    if "enum" in schema:
        return {type_name(item) for item in schema["enum"]}
    return set()


def type_name(value: Any) -> str:
    """The JSON Schema type of a JSON value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"
