"""``mcp-safety-gateway call TOOL key=value …`` and ``tools``: try the gateway from a terminal, no AI host needed.

It connects to a running gateway over streamable HTTP (2025-11-25 era, so confirmation prompts and progress
arrive during the call), prints the result as a table, and answers prompts at the keyboard: y/N for a checkbox,
the target's id for a typed confirmation. A stdin that is not a terminal answers nothing unless the operator says
``--answers-from-stdin``: a tool that may write is then not called at all (a cancelled prompt would use its plan
up), and any prompt that still comes is cancelled. A write that people approve on the gateway's page shows its
link and waits with a countdown, which Ctrl-C ends (gateway.cli.call.approval). Arguments are typed by the tool's
inputSchema (gateway.cli.call.arguments).
A bearer token is read from an environment variable (never from the command line, where ``ps`` would show it).
Everything shown that came from the gateway is escaped (gateway.text); every failure is one or two
sentences (gateway.cli.call.failures). Exit status: 0 success, 1 a refusal (a coded tool error), 2 a usage,
connection or protocol error, 130 a wait ended by Ctrl-C.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from gateway.cli.call.approval import ApprovalWait, until_decided
from gateway.cli.call.arguments import UsageError, parse_pairs
from gateway.cli.call.failures import LastStatus, explain, printable, unknown_tool

__all__ = ["UsageError", "parse_pairs", "run", "run_tools"]

PROG = "mcp-safety-gateway"


def say(*lines: str) -> None:
    """Sentences for the person, on stderr (stdout carries only results)."""
    for line in lines:
        print(f"{PROG}: {line}", file=sys.stderr)


@asynccontextmanager
async def connected(
    url: str, token: str | None, last: LastStatus, piped: bool = False, wait: ApprovalWait | None = None
) -> AsyncIterator[Client]:
    """A 2025-era client on the gateway, answering prompts at the keyboard (or from a pipe when ``piped``), and
    showing an approval page's link on ``wait``."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=600), event_hooks={"response": [last]})
    answers = Keyboard(piped, wait or ApprovalWait())
    async with (
        http,
        Client(streamable_http_client(url, http_client=http), mode="legacy", elicitation_callback=answers) as client,
    ):
        yield client


NOBODY_TO_ASK = (
    "not calling: the tool writes, and its confirmation needs a person, but stdin is not a terminal (the call was "
    "not sent, so a plan it names is still usable)",
    "run it in a terminal, or pass --answers-from-stdin to let a script answer",
)


def read_only(tool: types.Tool) -> bool:
    """Whether the tool says it only reads (a write, or a tool that says nothing, may ask to be confirmed)."""
    return tool.annotations is not None and tool.annotations.read_only_hint is True


class Keyboard:
    """Answers the gateway's questions from a person at a terminal.

    A stdin that is not a terminal (``echo y | mcp-safety-gateway call ...``) is a script, not a person: its
    prompts are cancelled, so nothing is written, unless the operator said ``--answers-from-stdin``. An approval
    page's link asks nobody here for a yes: it is shown, and the call waits for the people on the page."""

    def __init__(self, piped: bool, wait: ApprovalWait) -> None:
        self.piped = piped
        self.wait = wait

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        if isinstance(params, types.ElicitRequestURLParams):
            self.wait.show(params)
            return types.ElicitResult(action="accept")  # shown: the decision is the page's
        if not self.piped and not sys.stdin.isatty():
            say(
                "not answering: stdin is not a terminal, so no person is there to confirm",
                "run it in a terminal, or pass --answers-from-stdin to let a script answer",
            )
            return types.ElicitResult(action="cancel")
        return await ask_at_terminal(params)


async def ask_at_terminal(params: types.ElicitRequestParams) -> types.ElicitResult:
    """Show the gateway's question and read the answer from the keyboard."""
    message = getattr(params, "message", "")
    schema = getattr(params, "requested_schema", {}) or {}
    properties = schema.get("properties", {})
    print("\n" + "\n".join(printable(line) for line in str(message).split("\n")), flush=True)
    try:
        if "confirmTarget" in properties:
            title = printable(str(properties["confirmTarget"].get("title", "Confirm")))
            typed = await anyio.to_thread.run_sync(input, f"{title}: ")
            if not typed.strip():
                return types.ElicitResult(action="decline")
            return types.ElicitResult(action="accept", content={"confirmTarget": typed.strip()})
        answer = await anyio.to_thread.run_sync(input, "Confirm? [y/N] ")
    except (EOFError, KeyboardInterrupt):
        return types.ElicitResult(action="cancel")
    if answer.strip().lower() in {"y", "yes"}:
        return types.ElicitResult(action="accept", content={"confirm": True})
    return types.ElicitResult(action="decline")


async def show_progress(progress: float, total: float | None, message: str | None) -> None:
    """A progress notification from a long write, as one line on stderr."""
    step = f"{progress:g}/{total:g}" if total else f"{progress:g}"
    print(f"  ... {printable(message or '')} ({step})", file=sys.stderr, flush=True)


def render(body: dict[str, Any]) -> str:
    """Scalars as ``key: value`` lines, lists of objects as tables."""
    lines: list[str] = []
    for key, value in body.items():
        if isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
            lines.append(f"{printable(key)}:")
            lines.append(table(value))
        else:
            lines.append(f"{printable(key)}: {cell(value)}")
    return "\n".join(lines)


def table(rows: list[dict[str, Any]]) -> str:
    """Rows of objects as aligned columns."""
    columns = list(dict.fromkeys(key for row in rows for key in row))
    cells = [[printable(column) for column in columns]] + [
        [cell(row.get(column, "")) for column in columns] for row in rows
    ]
    widths = [max(len(line[index]) for line in cells) for index in range(len(columns))]
    return "\n".join(
        "  " + "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip() for line in cells
    )


def cell(value: Any) -> str:
    """A value as JSON would spell it (true, 5, [..]), strings as they are; escaped either way."""
    return printable(value if isinstance(value, str) else json.dumps(value))


def describe_tools(tools: list[types.Tool]) -> str:
    """Each tool with what its annotations promise and the arguments it takes."""
    blocks = []
    for tool in tools:
        title = f" - {printable(tool.title)}" if tool.title else ""
        lines = [f"{printable(tool.name)}{title}  [{hints(tool.annotations)}]"]
        if tool.description:
            lines.append(f"    {printable(tool.description)}")
        schema = tool.input_schema or {}
        required = set(schema.get("required") or [])
        for name, prop in (schema.get("properties") or {}).items():
            lines.append(f"    {printable(name)}: {argument(prop, name in required)}")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def hints(annotations: types.ToolAnnotations | None) -> str:
    """The annotation hints in words (an unset hint is shown as the spec's default)."""
    a = annotations or types.ToolAnnotations()
    words = ["read-only" if a.read_only_hint else "writes"]
    if not a.read_only_hint:
        words.append("destructive" if a.destructive_hint is not False else "not destructive")
    if a.idempotent_hint:
        words.append("idempotent")
    words.append("open world" if a.open_world_hint is not False else "closed world")
    return ", ".join(words)


def argument(prop: Any, required: bool) -> str:
    """One argument's type, bounds, length, pattern, choices and default."""
    if not isinstance(prop, dict):
        return "any"
    kind = prop.get("type", "any")
    parts = [printable(" | ".join(kind) if isinstance(kind, list) else str(kind))]
    if "enum" in prop:
        parts.append("one of " + ", ".join(cell(item) for item in prop["enum"]))
    low, high = prop.get("minimum"), prop.get("maximum")
    if low is not None or high is not None:
        parts.append(f"{'' if low is None else low}..{'' if high is None else high}")
    if "minLength" in prop:
        parts.append(f"at least {prop['minLength']} characters")
    if "maxLength" in prop:
        parts.append(f"at most {prop['maxLength']} characters")
    if "pattern" in prop:
        parts.append(f"matching {cell(prop['pattern'])}")
    if "default" in prop:
        parts.append(f"default {cell(prop['default'])}")
    parts.append("required" if required else "optional")
    return ", ".join(parts)


def show_result(result: types.CallToolResult, raw: bool) -> int:
    """Print a tool's answer; 0 on success, 1 on a refusal."""
    block = result.content[0] if result.content else None
    text = block.text if isinstance(block, types.TextContent) else ""
    if raw:
        try:  # JSON spelled again with every non-ASCII character escaped: still JSON, and safe on a terminal
            print(json.dumps(json.loads(text)))
        except ValueError:
            print(printable(text))
        return 1 if result.is_error else 0
    if result.is_error:
        try:
            body = json.loads(text)
        except ValueError:
            body = {"code": "error", "message": text}
        print(f"error {cell(body.get('code'))}: {cell(body.get('message'))}")
        if body.get("nextTool"):
            print(f"next: {cell(body['nextTool'])}")
        if body.get("details") is not None:
            print(f"details: {printable(json.dumps(body['details']))}")
        return 1
    print(render(result.structured_content or {}))
    return 0


async def call(url: str, tool: str, pairs: list[str], token_env: str, raw: bool, piped: bool = False) -> int:
    """The ``call`` subcommand: list the tools, type the arguments, call, print."""
    token = os.environ.get(token_env) or None
    last, wait = LastStatus(), ApprovalWait()

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        wait.progress(message)
        await show_progress(progress, total, message)

    try:
        async with connected(url, token, last, piped, wait) as client:
            listed = {item.name: item for item in (await client.list_tools()).tools}
            if tool not in listed:
                say(*unknown_tool(tool, list(listed)))
                return 2
            if not piped and not sys.stdin.isatty() and not read_only(listed[tool]):
                say(*NOBODY_TO_ASK)
                return 2
            try:
                arguments = parse_pairs(pairs, dict(listed[tool].input_schema))
            except UsageError as exc:
                say(f"{printable(tool)}: {exc}")
                return 2
            answered, result = await until_decided(client.call_tool(tool, arguments, progress_callback=progress), wait)
    except Exception as exc:
        say(*explain(exc, url, token_env, token is not None, last.status))
        return 2
    if not answered:
        say(*wait.stopped())
        return 130
    return show_result(result, raw)


async def list_tools(url: str, token_env: str, raw: bool) -> int:
    """The ``tools`` subcommand."""
    token = os.environ.get(token_env) or None
    last = LastStatus()
    try:
        async with connected(url, token, last) as client:
            tools = list((await client.list_tools()).tools)
    except Exception as exc:
        say(*explain(exc, url, token_env, token is not None, last.status))
        return 2
    if raw:
        for tool in tools:
            print(json.dumps(tool.model_dump(mode="json", by_alias=True, exclude_none=True)))
    else:
        print(describe_tools(tools))
    return 0


def quiet_libraries() -> None:
    """Keep library log records (the SDK's stack trace when a stream closes under an ended wait) off the terminal:
    the person is told what happened in sentences."""
    logging.getLogger().addHandler(logging.NullHandler())


def run(url: str, tool: str, pairs: list[str], token_env: str, raw: bool, piped: bool = False) -> int:
    """Entry of ``call``."""
    quiet_libraries()
    try:
        parse_pairs(pairs)  # the syntax, before any connection; the types come from the tool's schema
    except UsageError as exc:
        say(str(exc))
        return 2
    try:
        return anyio.run(call, url, tool, pairs, token_env, raw, piped)
    except KeyboardInterrupt:
        say("interrupted")
        return 130


def run_tools(url: str, token_env: str, raw: bool) -> int:
    """Entry of ``tools``."""
    quiet_libraries()
    try:
        return anyio.run(list_tools, url, token_env, raw)
    except KeyboardInterrupt:
        say("interrupted")
        return 130
