"""What makes a tool a god-tool, read from its definition alone (for the config's refusal, ``check`` and ``inspect``).

A god-tool takes the name of an action and does many things, read and write: an argument named like an action
(``ACTION_ARGUMENTS``), or a string argument whose enum lists verbs of which one changes something. ``risk_of``
classes one action by its verb (any destructive word wins, then write, then read; a verb none of the lists knows
is ``unknown``, and may change things). ``enumerated`` reads the actions an input schema lists for an argument.
``action_argument`` says which argument makes a definition a god-tool: the gateway publishes no such tool as a
pass-through (gateway.config.passthrough), since any caller could then run every action unchecked.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

from gateway.text import MAX_NAME, quoted

Risk = Literal["read", "write", "destructive", "unknown"]

ACTION_ARGUMENTS = ("action", "command", "cmd", "op", "operation", "verb", "method")
READ_VERBS = {
    "list", "get", "read", "show", "describe", "fetch", "search", "find", "query", "status", "view", "count",
    "history", "info", "lookup", "check", "stat", "stats", "peek", "browse", "export",
}  # fmt: skip
WRITE_VERBS = {
    "create", "add", "insert", "update", "set", "put", "patch", "rename", "enable", "disable", "apply",
    "assign", "import", "upload", "move", "copy", "edit", "modify", "save", "write", "start", "stop", "run",
}  # fmt: skip
DESTRUCTIVE_VERBS = {
    "delete", "drop", "wipe", "purge", "remove", "destroy", "truncate", "reset", "reseed", "restore", "clear",
    "erase", "kill", "revoke", "overwrite", "replace", "rollback", "flush", "terminate", "evict",
}  # fmt: skip


def risk_of(action: str) -> Risk:
    """An action's risk by its verb: any destructive word wins, then write, then read."""
    words = set(re.split(r"[^a-z0-9]+", re.sub(r"([a-z])([A-Z])", r"\1_\2", action).lower()))
    if words & DESTRUCTIVE_VERBS:
        return "destructive"
    if words & WRITE_VERBS:
        return "write"
    if words & READ_VERBS:
        return "read"
    return "unknown"


def enumerated(input_schema: Mapping[str, Any], argument: str) -> list[str] | None:
    """The actions the schema allows for ``argument``, or None when it does not enumerate them."""
    properties = input_schema.get("properties")
    schema = properties.get(argument) if isinstance(properties, Mapping) else None
    if not isinstance(schema, Mapping):
        return None
    if isinstance(schema.get("enum"), list):
        return [value for value in schema["enum"] if isinstance(value, str)]
    for combinator in ("oneOf", "anyOf"):
        options = schema.get(combinator)
        if isinstance(options, list) and options and all(isinstance(o, Mapping) and "const" in o for o in options):
            return [o["const"] for o in options if isinstance(o["const"], str)]
    return None


def action_argument(input_schema: Mapping[str, Any]) -> str | None:
    """Which argument makes a tool a god-tool, as a phrase naming it, or None: one named like an action, or one
    whose enum lists verbs of which one changes something."""
    properties = input_schema.get("properties")
    if not isinstance(properties, Mapping):
        return None
    for name in properties:
        if isinstance(name, str) and name.lower() in ACTION_ARGUMENTS:
            return f"an argument {quoted(name, MAX_NAME)} that names an action"
    for name in properties:
        verbs = [value for value in enumerated(input_schema, name) or [] if risk_of(value) != "unknown"]
        if len(verbs) > 1 and any(risk_of(verb) in ("write", "destructive") for verb in verbs):
            shown = ", ".join(quoted(verb, MAX_NAME) for verb in verbs[:6])
            return f"an argument {quoted(name, MAX_NAME)} whose enum lists actions ({shown})"
    return None
