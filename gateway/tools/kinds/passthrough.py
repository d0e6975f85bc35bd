"""The pass-through kinds (``kind = "passthrough"``): a backend's own tool, published on purpose, split by whether
it writes (``read_only`` in its hints).

    Relay              a tool that only reads: a checked relay (gateway.tools.passthrough)
    PassthroughWrite   a tool that writes: confirmed, keyed and audited like a write (gateway.write.passthrough);
                       a call opens its audit entry (a ``PassthroughCall``) before admission
    PASSTHROUGH        the registry's entry: the split itself

Neither calls anything in ``check``: the catalog already fit each to its backend's listing.
"""

from __future__ import annotations

from typing import Any

from mcp.server import ServerRequestContext

from gateway.catalog.published import PublishedTool
from gateway.config import PassthroughTool
from gateway.runtime import Gateway
from gateway.tools.kinds.checking import weaker_rule_warnings
from gateway.tools.kinds.kind import Kind, Reads, Split, ToolCall
from gateway.tools.passthrough import relay
from gateway.write import passthrough
from gateway.write.audited import Answer
from gateway.write.passthrough import PassthroughCall
from gateway.write.progress import Progress


class Relay(Reads[PassthroughTool]):
    model = PassthroughTool

    async def call(self, request: ToolCall[None], arguments: dict[str, Any]) -> Answer:
        """The backend's own read-only tool, its answer checked."""
        return await relay(request.gw, request.published, self.typed(request.published.config), arguments)


class PassthroughWrite(Kind[PassthroughTool, PassthroughCall]):
    model = PassthroughTool

    def opened(
        self, gw: Gateway, published: PublishedTool, caller: str, ctx: ServerRequestContext[Any, Any]
    ) -> PassthroughCall:
        """The call as its audit entry will record it."""
        config = self.typed(published.config)
        return PassthroughCall(gw, published.name, caller, Progress(ctx.session), config=config, published=published)

    def warnings(self, name: str, config: PassthroughTool) -> list[str]:
        """Each approval rule that confirms less strictly than the tool's own confirm."""
        return weaker_rule_warnings(name, config)

    async def call(self, request: ToolCall[PassthroughCall], arguments: dict[str, Any]) -> Answer:
        """The backend's own tool that writes, confirmed and keyed like a write."""
        return await passthrough.decide(request.audited, request.ctx, request.params, arguments)


RELAY = Relay()
PASSTHROUGH_WRITE = PassthroughWrite()
PASSTHROUGH = Split(reads=RELAY, writes=PASSTHROUGH_WRITE)
