"""The draft config ``inspect`` writes: what can be read from the tool definitions, and a ``TODO`` string for
every decision a person must make. The gateway refuses to load a file that still holds a ``TODO``
(gateway.config.parse_config), so a draft cannot be served half-decided.

From a god-tool: ``[backend]`` with its argument names; a read tool per list-like action; a preview and write
pair per destructive action, whose target read is the god-tool's get-like action. The version field,
the protection rule, the inputs, the summary numbers, the confirmation message, the payloads and the paths into
the answers stay TODO. Actions whose verb is unknown are never drafted as calls (they may change things).

A tool that executes the SQL it is given (findings.StatementTool) becomes a ``[statements.NAME]`` table and the
three statement tools (a bounded query, a preview that measures a write, an execute that runs the plan once):
the dialect, how the server answers, a read-only tool if it has one, the tables and the classes to allow stay
TODO.

Every other tool becomes a pass-through entry, and its hints are questions, never decisions: a server's hints are
its claims, and a hostile one claims ``readOnlyHint: true`` for a tool that flushes a cache. So ``read_only`` and
``destructive`` are always TODOs, each showing what the server claims (a tool that claims to be read-only is a read
to confirm; any other is held until the operator decides, or deletes the entry); ``idempotent`` and
``open_world`` are the server's where it states them, else TODOs (a read-only tool may leave them out: the spec
says they mean nothing for it, so that is no reason to hide it); a missing ``outputSchema`` is a TODO. So no
draft of a server with tools loads untouched. A tool that takes an action or command argument is not drafted
(gateway.config.godtool: the gateway would refuse it).

The server's text is its claim and may be hostile: it enters the draft only as TOML strings and comments
(gateway.text.toml_string, toml_comment), which parse back to exactly that text, so no name or description can
add a key or a table; a name with control, bidi or format characters is not drafted, only named in the header.
"""

from __future__ import annotations

import re
from typing import Any

from gateway.cli.inspect.findings import GodTool, ToolFindings
from gateway.config import SPEC_DEFAULTS, toml_key, toml_value
from gateway.text import is_plain, toml_comment

LIST_VERBS = {"list", "search", "find", "query", "browse", "export", "all"}
GET_VERBS = {"get", "describe", "show", "read", "fetch", "info", "view", "lookup"}
SUBTABLES = {"target", "get", "fields", "inputs", "summary", "annotations"}


def todo(question: str) -> str:
    """A decision left to a person."""
    return f"TODO: {question}"


def draft(server: str, backend: dict[str, Any], findings: list[ToolFindings]) -> dict[str, Any]:
    """The draft config (as data) for a server reached as ``backend`` describes, from its tools' findings. Only
    names a person can read as they are (gateway.text.is_plain) are drafted as values; the others are named,
    escaped, in the header."""
    gods = [found for found in findings if found.god is not None and is_plain(found.name)]
    main = gods[0] if gods else None
    noun = _noun(main.name if main is not None else server)
    data: dict[str, Any] = {
        "gateway": {"name": f"{_slug(server)[:40]}-gateway", "store": "sqlite:var/gateway.db", "state_dir": "var"},
        "backend": dict(backend),
        "tools": {},
    }
    if main is not None and main.god is not None:
        payload = main.god.payload_argument
        data["backend"].update(
            tool=main.name,
            action_argument=main.god.action_argument,
            payload_argument=(
                payload
                if payload is not None and is_plain(payload)
                else todo("the argument that carries an action's data")
            ),
        )
        data["tools"].update(_god_tool_tools(main.god, noun))
    for found in findings:
        if found.statement is not None and is_plain(found.name) and is_plain(found.statement.argument):
            _statement_tools(data, found.name, found.statement.argument)
        elif found.passable and is_plain(found.name):
            data["tools"][_free_name(_slug(found.name), data["tools"])] = _passthrough(found)
    return data


def header(server: str, findings: list[ToolFindings]) -> list[str]:
    """The comment lines above the draft: how it was made and what it leaves out."""
    lines = [
        f"Drafted by `mcp-safety-gateway inspect` from [{server}], by reading its tools/list only.",
        "Replace every TODO (the gateway refuses a file that still has one), then run",
        "`mcp-safety-gateway check --config THIS_FILE` against the server.",
    ]
    for found in findings:
        if not is_plain(found.name):
            lines.append(f"{found.name}: not drafted: its name holds control, bidi or format characters.")
        elif found.god is not None:
            hostile = sorted(name for name in found.god.actions if not is_plain(name))
            by_risk = {
                risk: sorted(n for n, r in found.god.actions.items() if r == risk and is_plain(n))
                for risk in ("write", "unknown")
            }
            if hostile:
                lines.append(f"{found.name}: not drafted (names with control, bidi or format characters): {hostile}")
            if not found.god.actions:
                lines.append(f"{found.name}: lists no actions; the tools below are a skeleton: name each action.")
            if by_risk["write"]:
                lines.append(f"{found.name}: not drafted (writes that destroy nothing): {', '.join(by_risk['write'])}")
            if by_risk["unknown"]:
                lines.append(f"{found.name}: not drafted (verb unknown, may write): {', '.join(by_risk['unknown'])}")
        elif found.action_argument is not None:
            lines.append(f"{found.name}: not drafted: it takes {found.action_argument} (wrap its actions instead).")
    if len([found for found in findings if found.god is not None]) > 1:
        lines.append("Only the first god-tool is drafted; wrap another with a [backends.NAME] table of its own.")
    return lines


def to_draft_toml(data: dict[str, Any], comments: list[str]) -> str:
    """TOML a person can edit: one table per tool, its target, inputs and fields as tables of their own."""
    lines = [toml_comment(line) for line in comments]
    for section, body in data.items():
        entries = body.items() if section in {"tools", "lookups", "backends", "statements"} else [(None, body)]
        for name, entry in entries:
            _table(lines, section if name is None else f"{section}.{toml_key(name)}", entry)
    return "\n".join(lines) + "\n"


def _god_tool_tools(god: GodTool, noun: str) -> dict[str, Any]:
    if not god.actions:  # nothing names the actions: a skeleton whose actions are TODO too
        name = f"change_{noun}"
        return {
            f"list_{_plural(noun)}": _read_tool(todo(f"the action that lists {_plural(noun)}"), noun),
            f"preview_{name}": _preview_tool(todo("a destructive action"), None, noun),
            name: _write_tool(todo("the destructive action to wrap"), f"preview_{name}", noun),
        }
    tools: dict[str, Any] = {}
    plain = {name: risk for name, risk in god.actions.items() if is_plain(name)}
    reads = [name for name, risk in plain.items() if risk == "read"]
    get = next((name for name in reads if _verbs(name) & GET_VERBS), None)
    for action in reads:
        if _verbs(action) & LIST_VERBS:
            tools[_tool_name(action, noun, plural=True)] = _read_tool(action, noun)
    for action, risk in plain.items():
        if risk == "destructive":
            name = _tool_name(action, noun)
            tools[f"preview_{name}"] = _preview_tool(action, get, noun)
            tools[name] = _write_tool(action, f"preview_{name}", noun)
    return tools


def _statement_tools(data: dict[str, Any], tool: str, argument: str) -> None:
    """A ``[statements.NAME]`` table for a tool that executes SQL, and its query, preview and execute tools."""
    statements = data.setdefault("statements", {})
    name = _free_name(_slug(tool), statements)
    statements[name] = {
        "tool": tool,
        "argument": argument,
        "read_tool": todo(
            "a tool of this server that runs statements without write access (dbhub: a read-only source's "
            "execute_sql_NAME), or delete this key: reads and measures then go to the tool itself"
        ),
        "dialect": todo('the database it runs statements on: "postgres" or "sqlite" (no other is analysed)'),
        "answers": todo('how it answers: "dbhub" (JSON) or "mcp-alchemy" (text)'),
        "tables": todo('the tables a statement may touch, e.g. ["tenants", "rows"]'),
    }
    tools = data["tools"]
    query, preview, execute = (_free_name(base, tools) for base in ("query", "preview_statement", "execute_statement"))
    tools[query] = {"kind": "statement_query", "statements": name}
    tools[preview] = {"kind": "statement_preview", "statements": name}
    tools[execute] = {
        "kind": "statement_execute",
        "preview": preview,
        "classes": todo(
            'the classes of write it may run, e.g. ["insert", "update", "delete"] ("ddl" and "truncate" need four '
            "eyes on the approval page)"
        ),
    }


def _read_tool(action: str, noun: str) -> dict[str, Any]:
    return {
        "kind": "read",
        "scopes": [f"{noun}:read"],
        "description": todo(f"what the model reads: one bounded page of the {action!r} list"),
        "call": {"action": action, "path": todo("where the list sits in the answer ('' when it is the answer)")},
        "items_key": _plural(noun),
        "sort_key": todo("a unique field of each item (its id)"),
        "fields": todo('the output fields: NAME = { from = "PATH", schema = { type = "string" } }'),
    }


def _preview_tool(action: str, get: str | None, noun: str) -> dict[str, Any]:
    return {
        "kind": "preview",
        "scopes": [f"{noun}:read"],
        "description": todo(f"what the model reads: computes what {action!r} would do and returns a plan"),
        "message": todo("the question the user confirms, with the effect in numbers, e.g. 'Reset {target_id}?'"),
        "target": {
            "noun": noun,
            "get": {
                "action": get or todo(f"the action that reads one {noun}"),
                "payload": todo('the payload that names the target, e.g. { id = "{target_id}" }'),
                "path": todo(f"where the {noun} sits in the answer ('' when it is the answer)"),
            },
            "id_field": todo(f"the path of the {noun}'s own id in what the read answers (plans and locks use it)"),
            "version_field": todo(f"the path of the {noun}'s version (a plan is stale once it changes)"),
            "not_found_text": todo(f"words of the error the server answers for an absent {noun}"),
            "protected_field": todo(f"the path of a flag that is true on {noun}s never to change (or remove)"),
        },
        "inputs": todo('the arguments: NAME = { schema = { type = "string" } }, exactly one with target = true'),
        "summary": todo("the numbers the user confirms: NAME = { target = PATH } or { lookup = NAME, key = INPUT }"),
    }


def _write_tool(action: str, preview: str, noun: str) -> dict[str, Any]:
    return {
        "kind": "write",
        "scopes": [f"{noun}:write"],
        "preview": preview,
        "description": todo(f"what the model reads: applies a plan from {preview} ({action!r})"),
        "call": {"action": action, "payload": todo('the payload, from the plan: { id = "{target_id}", ... }')},
        "destructive": True,
    }


def _passthrough(found: ToolFindings) -> dict[str, Any]:
    """A pass-through entry whose hints are questions (the module docstring says which)."""
    hints = found.stated_hints
    if found.claims_read_only:
        read_only = todo(
            f"a read to confirm: {_claim(hints, 'readOnlyHint')}; answer true only if a call changes nothing "
            "(false: every call is confirmed and keyed)"
        )
    else:
        read_only = todo(
            f"{_claim(hints, 'readOnlyHint')}: it may change things; answer false (every call is confirmed and "
            "keyed), or delete this entry to keep the tool hidden"
        )
    entry: dict[str, Any] = {"kind": "passthrough"}
    if _slug(found.name) != found.name:
        entry["source"] = found.name
    if not found.output_schema:
        entry["output_schema"] = todo(
            "the server declares no outputSchema: the JSON Schema (an object) its answers fit, or delete this entry"
        )
    entry["annotations"] = {
        "read_only": read_only,
        "destructive": todo(f"{_claim(hints, 'destructiveHint')}; false for a tool that is read-only"),
        "idempotent": hints.get("idempotentHint", todo(f"{_claim(hints, 'idempotentHint')}; true for a read")),
        "open_world": hints.get("openWorldHint", todo(f"{_claim(hints, 'openWorldHint')} (whether it reaches out)")),
    }
    return entry


def _claim(hints: dict[str, bool], hint: str) -> str:
    """What the server says of one hint: its claim, or that it left the hint to the spec's default."""
    if hint in hints:
        return f"the server claims {hint}: {str(hints[hint]).lower()}"
    return f"the server states no {hint} (a client assumes {str(SPEC_DEFAULTS[hint]).lower()})"


def _free_name(name: str, taken: dict[str, Any]) -> str:
    """``name``, or ``name_2``, ``name_3``... when another tool of the draft has it."""
    number, free = 1, name
    while free in taken:
        number += 1
        free = f"{name}_{number}"
    return free


def _table(lines: list[str], path: str, body: dict[str, Any]) -> None:
    lines += ["", f"[{path}]"]
    nested = []
    for key, value in body.items():
        if isinstance(value, dict) and key in SUBTABLES:
            nested.append((key, value))
        elif value is not None:
            lines.append(f"{toml_key(key)} = {toml_value(value)}")
    for key, value in nested:
        _table(lines, f"{path}.{toml_key(key)}", value)


def _verbs(action: str) -> set[str]:
    return set(re.split(r"[^a-z0-9]+", action.lower()))


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]+", "_", name).strip("_").lower() or "server"


def _noun(name: str) -> str:
    """A guess at what a god-tool manages, from its name (``manage_tenant`` -> ``tenant``)."""
    words = [word for word in _slug(name).split("_") if word not in {"manage", "admin", "handle", "tool", "do"}]
    noun = words[-1] if words else "target"
    noun = noun[:-1] if noun.endswith("s") and len(noun) > 3 else noun
    return noun if re.match(r"^[a-z][a-z0-9_]{0,31}$", noun) else "target"


def _tool_name(action: str, noun: str, *, plural: bool = False) -> str:
    slug = _slug(action)
    return slug if "_" in slug else f"{slug}_{_plural(noun) if plural else noun}"


def _plural(noun: str) -> str:
    return noun + "es" if noun.endswith(("s", "x", "ch", "sh")) else noun + "s"
