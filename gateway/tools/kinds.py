"""The kind registry: how a call of each kind of tool is carried out, and the one place that knows every kind.

A tool's kind is its config model (gateway.config.kinds, gateway.config.passthrough), and the model answers for
itself whatever is data: its schemas and hints, default scopes, whether it writes, what ``check`` reads of it.
The call needs the running gateway, which the config sits below, so it lives here: ``kind_of`` turns a tool's
config into the object that calls it, and is the only code in ``gateway`` that tests a config's class
(tests/unit/test_layout.py keeps it so). A new kind is a config model, its entry in ``gateway.config.ToolConfig``
and one class here.

Every ``call`` runs the admission steps (``admit``) where its kind needs them: a read or a preview first thing, a
write after its idempotency lookup (gateway.write.planned, gateway.tools.passthrough).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

import mcp_types as types
from mcp.server import ServerRequestContext

from gateway.catalog.published import PublishedTool, named_version
from gateway.config import PassthroughTool, PreviewTool, ReadTool, ToolConfig, WriteTool
from gateway.runtime import Gateway
from gateway.tools import passthrough
from gateway.tools.listing import list_page
from gateway.tools.preview import preview
from gateway.write.planned import Answer, WriteCall, run_write
from gateway.write.progress import Progress

Admit = Callable[[], Awaitable[dict[str, Any]]]


@dataclass(frozen=True)
class Request:
    """One call of a published tool, as the MCP surface hands it on."""

    gw: Gateway
    published: PublishedTool
    caller: str
    ctx: ServerRequestContext[Any, Any]
    params: types.CallToolRequestParams
    admit: Admit


class Kind(Protocol):
    """The call side of a tool's kind."""

    async def call(self, request: Request) -> Answer:
        """Carry out one call: the answer's body (to check against the outputSchema), or a request for input."""
        ...


@dataclass(frozen=True)
class Read:
    config: ReadTool

    async def call(self, request: Request) -> Answer:
        """One page of the backend's list."""
        return await list_page(request.gw, request.published.name, self.config, await request.admit())


@dataclass(frozen=True)
class Preview:
    config: PreviewTool

    async def call(self, request: Request) -> Answer:
        """A caller-bound plan, its version under the configured name."""
        r = request
        body = await preview(r.gw, r.published.name, self.config, await r.admit(), r.caller)
        return named_version(body, self.config.target.version_output)


@dataclass(frozen=True)
class Write:
    config: WriteTool

    async def call(self, request: Request) -> Answer:
        """The planned write (gateway.write.planned), its version under the preview's configured name."""
        r, plans = request, request.gw.config.preview_of(self.config)
        progress = Progress(r.ctx.session)
        call = WriteCall(r.gw, r.published.name, r.caller, progress=progress, config=self.config, preview=plans)
        outcome = await run_write(call, r.ctx, r.params, r.admit)
        if isinstance(outcome, types.InputRequiredResult):
            return outcome
        return named_version(outcome, plans.target.version_output)


@dataclass(frozen=True)
class Passthrough:
    config: PassthroughTool

    async def call(self, request: Request) -> Answer:
        """A backend's own tool: relayed, or confirmed and keyed like a write (gateway.tools.passthrough)."""
        r = request
        return await passthrough.run(r.gw, r.published, self.config, r.caller, r.ctx, r.params, r.admit)


def kind_of(config: ToolConfig) -> Kind:
    """The object that carries out calls of a tool with this config."""
    if isinstance(config, ReadTool):
        return Read(config)
    if isinstance(config, PreviewTool):
        return Preview(config)
    if isinstance(config, WriteTool):
        return Write(config)
    return Passthrough(config)
