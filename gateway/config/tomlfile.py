"""Config data as TOML and back, where the standard library leaves a sentence to write: ``to_toml`` writes config
data as TOML (for tools and tests that write configs), and ``declared_twice`` turns TOML's own error for a table
declared twice into a sentence naming both places and the way out. Reading and validating is gateway.config's.
"""

from __future__ import annotations

import ast
import re
import tomllib
from typing import Any

from gateway.text import toml_string

BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def to_toml(data: dict[str, Any]) -> str:
    """Config data (as ``model_dump(by_alias=True)`` gives it) back to TOML, for tools and tests that write
    configs: one table per section (tools, lookups and backends one per entry), values inline. TOML has no null, so a
    None is left out and that key takes its default."""
    lines: list[str] = []
    for name, section in data.items():
        entries = section.items() if name in {"tools", "lookups", "backends"} else [(None, section)]
        for entry, body in entries:
            lines.append(f"[{name}]" if entry is None else f"[{name}.{toml_key(entry)}]")
            lines.extend(f"{toml_key(key)} = {toml_value(item)}" for key, item in body.items() if item is not None)
    return "\n".join(lines) + "\n"


def toml_value(item: Any) -> str:
    """One value as inline TOML (a None inside a table is left out)."""
    if isinstance(item, bool):
        return "true" if item else "false"
    if isinstance(item, int | float):
        return repr(item)
    if isinstance(item, str):
        return toml_string(item)
    if isinstance(item, list):
        return "[" + ", ".join(toml_value(element) for element in item) + "]"
    pairs = [f"{toml_key(key)} = {toml_value(element)}" for key, element in item.items() if element is not None]
    return "{" + ", ".join(pairs) + "}"


def toml_key(key: str) -> str:
    """A key as TOML: bare when it can be, else a quoted string (gateway.text.toml_string)."""
    return key if BARE_KEY.match(key) else toml_string(key)


DECLARED_TWICE = re.compile(r"^Cannot declare \((.*)\) twice \(at line (\d+), column \d+\)$")


def declared_twice(text: str, exc: tomllib.TOMLDecodeError) -> str:
    """TOML's own message, or for a table declared twice a sentence naming both places and the way out: a tool's
    published name is its table's name, so two backends' tools of one name need two names."""
    found = DECLARED_TWICE.match(str(exc))
    if found is None:
        return str(exc)
    key, second = tuple(ast.literal_eval(f"({found[1]},)")), int(found[2])
    first = next((number for number, line in enumerate(text.splitlines(), 1) if _header_of(line) == key), None)
    where = f"lines {first} and {second}" if first is not None and first != second else f"line {second}"
    return (
        f"[{'.'.join(toml_key(part) for part in key)}] is declared twice ({where}); every table names one thing. "
        "For two tools of one name (on two backends, say), give each its own table name and keep the backend's "
        'name in source = "..."'
    )


def _header_of(line: str) -> tuple[str, ...] | None:
    """The key of a ``[table]`` header line, or None."""
    stripped = line.strip()
    if not stripped.startswith("[") or stripped.startswith("[["):
        return None
    try:
        table: Any = tomllib.loads(stripped)
    except tomllib.TOMLDecodeError:
        return None
    parts: list[str] = []
    while isinstance(table, dict) and len(table) == 1:
        ((part, table),) = table.items()
        parts.append(part)
    return tuple(parts)
