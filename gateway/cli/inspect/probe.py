"""The I/O of ``inspect``: connect to a server, read its tool definitions, print the findings, write the draft.

Nothing but ``initialize`` and ``tools/list`` is sent (``mode="legacy"``: no discovery probe either), so
pointing ``inspect`` at a production server changes nothing there. Headers given with ``--header`` are used
for this connection only and never written to the draft; ``--header-env NAME=VAR`` reads the value from the
environment and the draft keeps the reference (``backend.headers_from_env``), never the secret. A server that
cannot be read is one sentence naming it and the flag to change (``Server.unreadable``): nothing answers at the
URL, it answers HTTP 404 or wants credentials, the command does not exist or exits at once, or it is silent past
``--timeout``.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.stdio import get_default_environment, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from gateway.backend.client import all_tools, resolve_command
from gateway.cli.call.failures import LastStatus, leaf_of
from gateway.cli.inspect.draft import draft, header, to_draft_toml
from gateway.cli.inspect.findings import ToolFindings, examine
from gateway.text import escaped, quoted

NAME_CHARS = 200
"""A longer server or tool name is cut in the report (the draft's header keeps it whole, escaped)."""
CONNECTION_CLOSED = -32000
"""The SDK's code when the server's side of the connection closed (a stdio child that exited)."""


@dataclass(frozen=True)
class Server:
    """Where the server is: a stdio command line, or a URL with headers."""

    command: list[str] = field(default_factory=list)
    url: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    headers_from_env: dict[str, str] = field(default_factory=dict)

    def backend_table(self) -> dict[str, Any]:
        """How the draft's ``[backend]`` reaches the same server."""
        if self.url is not None:
            table: dict[str, Any] = {"transport": "http", "url": self.url}
            if self.headers_from_env:
                table["headers_from_env"] = dict(self.headers_from_env)
            return table
        # The gateway starts a stdio child in backend.cwd (default: the config's folder); the draft names the folder
        # inspect ran it in, so a relative path in the command line means what it meant here.
        return {"transport": "stdio", "command": self.command[0], "args": self.command[1:], "cwd": os.getcwd()}

    @cached_property
    def http(self) -> httpx2.AsyncClient | None:
        """The HTTP client of a URL, with the headers (closed by read_server); it records the last status."""
        if self.url is None:
            return None
        from_env = {name: os.environ.get(var, "") for name, var in self.headers_from_env.items()}
        return httpx2.AsyncClient(headers={**from_env, **self.headers}, event_hooks={"response": [self.last]})

    @cached_property
    def last(self) -> LastStatus:
        """The HTTP status of the server's last answer (the SDK reports a 404 like any other failure)."""
        return LastStatus()

    def unreadable(self, exc: BaseException, seconds: float) -> str:
        """Why the tools could not be read, naming the server and what to change."""
        program = quoted(self.command[0], NAME_CHARS) if self.command else ""
        where = quoted(self.url, NAME_CHARS) if self.url is not None else program
        leaf = leaf_of(exc)
        if isinstance(leaf, TimeoutError | httpx2.TimeoutException):
            return f"{where} did not answer initialize and tools/list within {seconds:g} s (raise it with --timeout)"
        if isinstance(leaf, FileNotFoundError):
            return f"cannot start {program}: no such command; check --command (is it installed, and on PATH?)"
        if isinstance(leaf, PermissionError):
            return f"cannot start {program}: it is not an executable program; check --command"
        status = self.last.status
        if status in (401, 403):
            return (
                f"{where} refused the connection (HTTP {status}): it wants credentials; send them with "
                "--header 'Authorization: Bearer ...' or --header-env NAME=ENV_VAR"
            )
        if status is not None and status >= 400:
            return f"{where} answered HTTP {status}, not MCP; check --url (the server's streamable-HTTP endpoint)"
        if isinstance(leaf, httpx2.ConnectError | ConnectionError):
            return f"nothing answers at {where}: is the server running? check --url"
        if isinstance(leaf, MCPError) and self.url is None and leaf.code == CONNECTION_CLOSED:
            return f"{where} exited before it answered initialize (its own output is above); check --command"
        if isinstance(leaf, MCPError):
            return f"{where} answered with protocol error {leaf.code}: {escaped(leaf.message, NAME_CHARS)}"
        if isinstance(leaf, OSError):
            return f"cannot reach {where}: {escaped(leaf.strerror or 'an operating-system error', NAME_CHARS)}"
        return f"cannot talk to {where}; check {'--url' if self.url is not None else '--command'} and its log"

    def connect(self) -> AbstractAsyncContextManager[Client]:
        """A client connection: ``initialize`` is its one request."""
        if self.url is not None and self.http is not None:
            return Client(streamable_http_client(self.url, http_client=self.http), mode="legacy")
        params = StdioServerParameters(
            command=resolve_command(self.command[0]), args=self.command[1:], env=get_default_environment()
        )
        return Client(stdio_client(params, errlog=sys.stderr), mode="legacy")


async def read_server(server: Server) -> tuple[types.Implementation | None, list[types.Tool]]:
    """The server's name and version (if it gave them) and its tool definitions."""
    try:
        async with server.connect() as client:
            return client.server_info, await all_tools(client)
    finally:
        if server.http is not None:
            await server.http.aclose()


def inspect(server: Server, out: Callable[[str], None], *, draft_to: Path | None, as_json: bool, seconds: float) -> int:
    """Inspect a server: 0 when its tools were read (whatever they say), 1 when it could not be reached."""

    async def read() -> tuple[types.Implementation | None, list[types.Tool]]:
        with anyio.fail_after(seconds):
            return await read_server(server)

    try:
        info, tools = anyio.run(read)
    except Exception as exc:  # any failure to reach or read the server is reported, not raised
        out(f"cannot read the server's tools: {server.unreadable(exc, seconds)}")
        return 1
    name = f"{info.name} {info.version}" if info is not None else "the server"
    findings = [examine(tool) for tool in tools]
    if as_json:
        out(json.dumps({"server": name, "tools": [asdict(found) for found in findings]}, indent=2))
    else:
        out("\n".join(report(name, findings)))
    if draft_to is not None:
        data = draft(info.name if info is not None else "server", server.backend_table(), findings)
        draft_to.write_text(to_draft_toml(data, header(name, findings)), encoding="utf-8")
        if not as_json:
            out(f"\nwrote a draft config to {draft_to}: replace every TODO, then run check on it")
    return 0


def report(server: str, findings: list[ToolFindings]) -> list[str]:
    """What each tool's definition says, one block per tool; every name the server gave is shown through the one
    escaper (gateway.text), so its text cannot ring, repaint or turn around the operator's terminal."""
    lines = [f"{quoted(server, NAME_CHARS)}: {len(findings)} tools (read from tools/list; nothing was called)"]
    for found in findings:
        lines.append("")
        name = escaped(found.name, NAME_CHARS)
        if found.god is not None:
            lines.append(f"{name}: GOD-TOOL ({'; '.join(found.god.signals)})")  # signals quote the names they hold
            for action, risk in found.god.actions.items():
                lines.append(f"  action {quoted(action, NAME_CHARS)}: {risk}")
        elif found.action_argument is not None:
            lines.append(f"{name}: takes {found.action_argument}: never passed through (wrap its actions)")
        elif found.statement is not None:
            said = "; ".join(found.statement.signals)  # signals quote the names they hold
            lines.append(f"{name}: EXECUTES STATEMENTS ({said}): drafted as statement query, preview and execute tools")
        elif found.claims_read_only:
            lines.append(f"{name}: claims to be read-only: a read to confirm (drafted with a TODO)")
        else:
            lines.append(f"{name}: may write: held for a decision (drafted with a TODO)")
        if found.stated_hints:
            claims = ", ".join(f"{hint} {str(value).lower()}" for hint, value in found.stated_hints.items())
            lines.append(f"  hints it claims: {claims}")
        if found.implicit_hints:
            defaults = ", ".join(
                f"{hint} (would be {str(value).lower()})" for hint, value in found.implicit_hints.items()
            )
            lines.append(f"  hints left to the spec's defaults: {defaults}")
        if not found.output_schema:
            lines.append("  no outputSchema")
        for argument in found.free_form:
            lines.append(f"  free-form object argument {quoted(argument, NAME_CHARS)}")
    return lines
