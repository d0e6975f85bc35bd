"""The kind registry: how a call of each kind of tool is carried out, and the one place that knows every kind.

A tool's kind is its config model (gateway.config.kinds, gateway.config.passthrough), and the model answers for
itself whatever is data: its schemas and hints, default scopes, whether it writes, what ``check`` reads of it.
The call needs the running gateway, which the config sits below, so it lives here: ``kind_of`` turns one call of
a tool into the object that carries it out, and is the only code in ``gateway`` that tests a config's class
(tests/unit/test_layout.py keeps it so). A new kind is a config model, its entry in ``gateway.config.ToolConfig``
and one class here.

Each object has the call's ``evidence``: for a tool that writes, the audit entry its decision will leave (the
MCP surface's chain opens it before admission, so a refused call is audited too); None for one that does not.
``call`` gets the admitted arguments (gateway.mcp.chain ran authorization, rate limit, caps and schema).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import mcp_types as types
from mcp.server import ServerRequestContext

from gateway.catalog.published import PublishedTool, named_version
from gateway.config import PassthroughTool, PreviewTool, ReadTool, WriteTool
from gateway.runtime import Gateway
from gateway.tools.listing import list_page
from gateway.tools.passthrough import relay
from gateway.tools.preview import preview
from gateway.write import passthrough, planned
from gateway.write.audited import Answer, AuditedCall
from gateway.write.passthrough import PassthroughCall
from gateway.write.planned import WriteCall
from gateway.write.progress import Progress


@dataclass(frozen=True)
class Request:
    """One call of a published tool, as the MCP surface hands it on."""

    gw: Gateway
    published: PublishedTool
    caller: str
    ctx: ServerRequestContext[Any, Any]
    params: types.CallToolRequestParams


class Kind(Protocol):
    """One call of a tool, carried out as its kind does it."""

    @property
    def evidence(self) -> AuditedCall | None:
        """The audit entry this call's decision leaves, for a tool that writes; None otherwise."""
        ...

    async def call(self, arguments: dict[str, Any]) -> Answer:
        """Carry out the admitted call: the answer's body (to check against the outputSchema), or a request for
        input."""
        ...


@dataclass(frozen=True)
class Read:
    request: Request
    config: ReadTool
    evidence: None = None

    async def call(self, arguments: dict[str, Any]) -> Answer:
        """One page of the backend's list."""
        return await list_page(self.request.gw, self.request.published.name, self.config, arguments)


@dataclass(frozen=True)
class Preview:
    request: Request
    config: PreviewTool
    evidence: None = None

    async def call(self, arguments: dict[str, Any]) -> Answer:
        """A caller-bound plan, its version under the configured name."""
        r = self.request
        body = await preview(r.gw, r.published.name, self.config, arguments, r.caller)
        return named_version(body, self.config.target.version_output)


@dataclass(frozen=True)
class Write:
    request: Request
    config: WriteTool
    evidence: WriteCall

    async def call(self, arguments: dict[str, Any]) -> Answer:
        """The planned write (gateway.write.planned), its version under the preview's configured name."""
        outcome = await planned.decide(self.evidence, self.request.ctx, self.request.params, arguments)
        if not isinstance(outcome, dict):
            return outcome
        return named_version(outcome, self.evidence.preview.target.version_output)


@dataclass(frozen=True)
class Relay:
    request: Request
    config: PassthroughTool
    evidence: None = None

    async def call(self, arguments: dict[str, Any]) -> Answer:
        """A backend's own read-only tool, its answer checked (gateway.tools.passthrough)."""
        return await relay(self.request.gw, self.request.published, self.config, arguments)


@dataclass(frozen=True)
class PassthroughWrite:
    request: Request
    config: PassthroughTool
    evidence: PassthroughCall

    async def call(self, arguments: dict[str, Any]) -> Answer:
        """A backend's own tool that writes, confirmed and keyed like a write (gateway.write.passthrough)."""
        return await passthrough.decide(self.evidence, self.request.ctx, self.request.params, arguments)


def kind_of(request: Request) -> Kind:
    """The object that carries out this call of its tool."""
    r, config = request, request.published.config
    if isinstance(config, ReadTool):
        return Read(r, config)
    if isinstance(config, PreviewTool):
        return Preview(r, config)
    progress = Progress(r.ctx.session)
    if isinstance(config, WriteTool):
        plans = r.gw.config.preview_of(config)
        return Write(r, config, WriteCall(r.gw, r.published.name, r.caller, progress, config=config, preview=plans))
    if not config.writes:
        return Relay(r, config)
    call = PassthroughCall(r.gw, r.published.name, r.caller, progress, config=config, published=r.published)
    return PassthroughWrite(r, config, call)
