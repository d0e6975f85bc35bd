"""The statement preview kind (``kind = "statement_preview"``): classifies and measures one write and issues a
plan for its execute tool (gateway.tools.statement_preview).

Its check calls nothing (a measure of a statement nobody asked for would be a guess): the catalog already fit it to
its backend's listing.
"""

from __future__ import annotations

from typing import Any

from gateway.config import StatementPreviewTool
from gateway.tools.kinds.kind import Reads, ToolCall
from gateway.tools.kinds.plans import statement_write_of
from gateway.tools.statement_preview import preview_statement
from gateway.write.audited import Answer


class StatementPreview(Reads[StatementPreviewTool]):
    model = StatementPreviewTool

    async def call(self, request: ToolCall[None], arguments: dict[str, Any]) -> Answer:
        """A caller-bound plan for the statement."""
        gw, name = request.gw, request.published.name
        write = statement_write_of(gw.config, name)
        return await preview_statement(gw, name, self.typed(request.published.config), write, arguments, request.caller)


STATEMENT_PREVIEW = StatementPreview()
