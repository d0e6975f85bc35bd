"""``mcp-safety-gateway call TOOL key=value key:=json …``: try the gateway from a terminal, no AI host needed.

It connects to a running gateway over streamable HTTP (2025-11-25 era, so confirmation prompts arrive during
the call), prints the result as a table, and answers prompts at the keyboard: y/N for a checkbox, the target's
id for a typed confirmation. ``key=value`` sends a string; ``key:=value`` sends JSON (``limit:=5``). A bearer
token is read from an environment variable (never from the command line, where ``ps`` would show it).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import anyio
import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError


class UsageError(Exception):
    """An argument the terminal client cannot read."""


def parse_pairs(pairs: list[str]) -> dict[str, Any]:
    """``key=value`` (a string) and ``key:=json`` (any JSON value) into tool arguments."""
    arguments: dict[str, Any] = {}
    for pair in pairs:
        key, equals, value = pair.partition("=")
        if not equals or not key.rstrip(":"):
            raise UsageError(f"{pair!r} is not key=value or key:=json")
        if key.endswith(":"):
            try:
                arguments[key[:-1]] = json.loads(value)
            except ValueError:
                raise UsageError(f"{key}= needs JSON, got {value!r} (use {key[:-1]}={value} for a string)") from None
        else:
            arguments[key] = value
    return arguments


async def ask_at_terminal(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    """Show the gateway's question and read the answer from the keyboard."""
    message = getattr(params, "message", "")
    schema = getattr(params, "requested_schema", {}) or {}
    properties = schema.get("properties", {})
    print(f"\n{message}", flush=True)
    try:
        if "confirmTarget" in properties:
            typed = await anyio.to_thread.run_sync(input, f"{properties['confirmTarget'].get('title', 'Confirm')}: ")
            if not typed.strip():
                return types.ElicitResult(action="decline")
            return types.ElicitResult(action="accept", content={"confirmTarget": typed.strip()})
        answer = await anyio.to_thread.run_sync(input, "Confirm? [y/N] ")
    except (EOFError, KeyboardInterrupt):
        return types.ElicitResult(action="cancel")
    if answer.strip().lower() in {"y", "yes"}:
        return types.ElicitResult(action="accept", content={"confirm": True})
    return types.ElicitResult(action="decline")


def render(body: dict[str, Any]) -> str:
    """Scalars as ``key: value`` lines, lists of objects as tables."""
    lines: list[str] = []
    for key, value in body.items():
        if isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
            lines.append(f"{key}:")
            lines.append(table(value))
        else:
            lines.append(f"{key}: {cell(value)}")
    return "\n".join(lines)


def table(rows: list[dict[str, Any]]) -> str:
    """Rows of objects as aligned columns."""
    columns = list(dict.fromkeys(key for row in rows for key in row))
    cells = [columns] + [[cell(row.get(column, "")) for column in columns] for row in rows]
    widths = [max(len(line[index]) for line in cells) for index in range(len(columns))]
    return "\n".join(
        "  " + "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip() for line in cells
    )


def cell(value: Any) -> str:
    """A value as JSON would spell it (true, 5, [..]), strings as they are."""
    return value if isinstance(value, str) else json.dumps(value)


async def call(url: str, tool: str, arguments: dict[str, Any], token: str | None, raw: bool) -> int:
    """Call one tool and print what came back; 0 on success, 1 on a refusal, 2 on a protocol error."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=600))
    try:
        async with Client(
            streamable_http_client(url, http_client=http), mode="legacy", elicitation_callback=ask_at_terminal
        ) as client:
            result = await client.call_tool(tool, arguments)
    except MCPError as exc:
        print(f"protocol error {exc.code}: {exc.message}", file=sys.stderr)
        return 2
    block = result.content[0] if result.content else None
    text = block.text if isinstance(block, types.TextContent) else ""
    if raw:
        print(text)
        return 1 if result.is_error else 0
    if result.is_error:
        body = json.loads(text)
        print(f"error {body.get('code')}: {body.get('message')}")
        if body.get("nextTool"):
            print(f"next: {body['nextTool']}")
        if body.get("details") is not None:
            print(f"details: {json.dumps(body['details'])}")
        return 1
    print(render(result.structured_content or {}))
    return 0


def run(url: str, tool: str, pairs: list[str], token_env: str, raw: bool) -> int:
    """The ``call`` subcommand."""
    try:
        arguments = parse_pairs(pairs)
    except UsageError as exc:
        print(f"mcp-safety-gateway call: {exc}", file=sys.stderr)
        return 2
    return anyio.run(call, url, tool, arguments, os.environ.get(token_env) or None, raw)
