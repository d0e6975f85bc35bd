"""The statement execute kind (``kind = "statement_execute"``): runs a statement preview's plan, confirmed, keyed
and audited (gateway.write.statement).

A call opens its audit entry (a ``StatementCall``, with its preview and the ``[statements.NAME]`` it holds to)
before admission. Its check calls nothing: nothing that writes is ever called by ``check``.
"""

from __future__ import annotations

from typing import Any

from mcp.server import ServerRequestContext

from gateway.catalog.published import PublishedTool
from gateway.config import StatementExecuteTool
from gateway.runtime import Gateway
from gateway.tools.kinds.checking import weaker_rule_warnings
from gateway.tools.kinds.kind import Kind, ToolCall
from gateway.tools.kinds.plans import statement_preview_of
from gateway.write import statement
from gateway.write.audited import Answer
from gateway.write.progress import Progress
from gateway.write.statement import StatementCall


class StatementExecute(Kind[StatementExecuteTool, StatementCall]):
    model = StatementExecuteTool

    def opened(
        self, gw: Gateway, published: PublishedTool, caller: str, ctx: ServerRequestContext[Any, Any]
    ) -> StatementCall:
        """The call, with its preview and statement source, as its audit entry will record it."""
        config = self.typed(published.config)
        preview = statement_preview_of(gw.config, config)
        source = gw.config.statements[preview.statements]
        return StatementCall(
            gw, published.name, caller, Progress(ctx.session), config=config, preview=preview, source=source
        )

    def warnings(self, name: str, config: StatementExecuteTool) -> list[str]:
        """Each approval rule that confirms less strictly than the tool's own confirm."""
        return weaker_rule_warnings(name, config)

    async def call(self, request: ToolCall[StatementCall], arguments: dict[str, Any]) -> Answer:
        """The planned statement, run once."""
        return await statement.decide(request.audited, request.ctx, request.params, arguments)


STATEMENT_EXECUTE = StatementExecute()
