"""The planned write kind (``kind = "write"``): applies a preview's plan, confirmed, keyed and audited
(gateway.write.planned).

A call opens its audit entry (a ``WriteCall``, with the preview that issued its plans) before admission. Its
check never calls the write: the action it would call is handed to ``check``'s verification of every write action
of the backend, by name. ``check --explain`` reads the target and the plan's numbers as the preview would.
"""

from __future__ import annotations

from typing import Any

from mcp.server import ServerRequestContext

from gateway.catalog.published import PublishedTool, named_version
from gateway.config import WriteTool
from gateway.runtime import Gateway
from gateway.tools.kinds.checking import Checking, Probe, weaker_rule_warnings
from gateway.tools.kinds.kind import Explained, Kind, ToolCall
from gateway.tools.kinds.plans import preview_of
from gateway.tools.preview import effect
from gateway.write import planned
from gateway.write.audited import Answer
from gateway.write.planned import WriteCall
from gateway.write.progress import Progress


class PlannedWrite(Kind[WriteTool, WriteCall]):
    model = WriteTool
    explains = True

    def opened(
        self, gw: Gateway, published: PublishedTool, caller: str, ctx: ServerRequestContext[Any, Any]
    ) -> WriteCall:
        """The call, with the preview whose plans it applies, as its audit entry will record it."""
        config = self.typed(published.config)
        plans = preview_of(gw.config, config)
        return WriteCall(gw, published.name, caller, Progress(ctx.session), config=config, preview=plans)

    def warnings(self, name: str, config: WriteTool) -> list[str]:
        """Each approval rule that confirms less strictly than the tool's own confirm."""
        return weaker_rule_warnings(name, config)

    async def check(self, checking: Checking, name: str, config: WriteTool) -> None:
        """The action it would call, for ``check`` to verify by name (never called)."""
        checking.actions[name] = config.call.action

    async def explained(
        self, probe: Probe, name: str, config: WriteTool, target: str, pairs: dict[str, Any]
    ) -> Explained:
        """The target and the numbers a plan for ``target`` would state, read as the preview reads them."""
        preview = preview_of(probe.config, config)
        arguments = {**pairs, preview.target_input: target}
        state, summary = await effect(probe.reader, probe.lookup, preview, arguments)
        return Explained(config, state, summary, arguments)

    async def call(self, request: ToolCall[WriteCall], arguments: dict[str, Any]) -> Answer:
        """The planned write, its version under the preview's configured name."""
        write = request.audited
        outcome = await planned.decide(write, request.ctx, request.params, arguments)
        if not isinstance(outcome, dict):
            return outcome
        return named_version(outcome, write.preview.target.version_output)


WRITE = PlannedWrite()
