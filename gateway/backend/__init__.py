"""The legacy backend as the gateway sees it: one interface, and the two errors every transport maps to.

    Backend              call / read one god-tool action or one of the backend's other tools, list its tools,
                         probe it
    BackendUnavailable   the call was never sent (not connected; connect or spawn failed) - safe to retry
    OutcomeLost          the call was sent on a live connection and no answer came (dropped, timed out)
    unreachable          the backend_unavailable refusal a caller gets, naming the backend

An ``isError`` answer from the god-tool is not an exception: it is a ``Reply`` with ``is_error`` set.
``client.McpBackend`` is the implementation: an MCP client over stdio or streamable HTTP, or over the SDK's
in-memory transport (the tests run the legacy server in their own process that way), over one of the two wire
transports, ``stdio`` (a child process the gateway starts itself) and ``transports`` (HTTP), each stopping at
``backend.max_result_bytes`` while it reads; over stdio, tool calls take ``lane``, past the SDK's dispatcher (the
SDK's client keeps the handshake, listings and pings). The config's ``Call`` (payload template in, data at a path
out) is interpreted by its own model (gateway.config.mapping); ``reads`` turns the read actions into targets,
listings and lookups. ``sql`` sends statements to a statement-executing server's own tools (a read, a measure, a
write), and ``sql_answers`` reads what such a server answers, by its shape. ``actions`` reads what a god-tool says
of its own actions (the valid ones its refusal lists).

Imported by the tools, the write package, the catalog, the runtime and the CLI (``check``, ``inspect``); imports
config, statements, records, errors, observability and text, never a package that serves callers.
"""

from __future__ import annotations

from typing import Any, Protocol

from mcp_types import Tool

from gateway.errors import Code, ToolError
from gateway.records import Reply


def unreachable(backend: str, next_step: str = "Nothing was changed; retry later.") -> ToolError:
    """backend_unavailable naming the backend (in the message and as ``details.backend``): nothing was sent."""
    return ToolError(
        Code.BACKEND_UNAVAILABLE,
        f"The backend {backend!r} cannot be reached right now. {next_step}",
        details={"backend": backend},
    )


class BackendUnavailable(Exception):
    """The backend could not be reached; nothing was sent."""


class OutcomeLost(Exception):
    """A call was sent but its answer never came; it may or may not have taken effect."""


class Backend(Protocol):
    """What the gateway needs of a legacy MCP server."""

    async def call(self, action: str, payload: dict[str, Any], read_timeout: float | None = None) -> Reply:
        """Send one god-tool call; raise BackendUnavailable or OutcomeLost as documented above."""
        ...

    async def read(self, action: str, payload: dict[str, Any], read_timeout: float | None = None) -> Reply:
        """A call that changes nothing: retried once on a fresh connection if the first was lost."""
        ...

    async def call_tool(
        self, tool: str, arguments: dict[str, Any], read_timeout: float | None = None, *, label: str | None = None
    ) -> Reply:
        """Send one call of any of the backend's own tools (a pass-through tool), like ``call``."""
        ...

    async def read_tool(
        self, tool: str, arguments: dict[str, Any], read_timeout: float | None = None, *, label: str | None = None
    ) -> Reply:
        """A call of any tool that changes nothing, like ``read``."""
        ...

    async def list_tools(self) -> list[Tool]:
        """The backend's own tools; BackendUnavailable when they cannot be read."""
        ...

    async def probe(self) -> bool:
        """Whether the backend can be reached now."""
        ...
