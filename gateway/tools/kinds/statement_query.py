"""The statement query kind (``kind = "statement_query"``): one read relayed to a statement-executing server,
bounded (gateway.tools.statement_query).

Its check calls nothing: the catalog already fit it to its backend's listing (the tool and its SQL argument).
"""

from __future__ import annotations

from typing import Any

from gateway.config import StatementQueryTool
from gateway.tools.kinds.kind import Reads, ToolCall
from gateway.tools.statement_query import query
from gateway.write.audited import Answer


class StatementQuery(Reads[StatementQueryTool]):
    model = StatementQueryTool

    async def call(self, request: ToolCall[None], arguments: dict[str, Any]) -> Answer:
        """The read's rows, bounded."""
        return await query(request.gw, request.published.name, self.typed(request.published.config), arguments)


STATEMENT_QUERY = StatementQuery()
