"""A statement query tool: one read, relayed to a statement-executing server, its rows bounded.

The statement is analysed as a read (gateway.backend.sql.analysed): a write, a data-modifying WITH, SELECT ...
INTO, a row lock, a writing function or a table outside the list is refused before anything is sent. Its
normalised text goes to the source's read tool (a read-only source where the server has one, so that a function
no parser can see into still cannot write), and its rows are cut to ``max_rows`` and ``max_bytes`` of JSON;
``truncated`` says when rows were left out, here or by the server itself.
"""

from __future__ import annotations

import json
from typing import Any

from gateway.backend.sql import analysed, read
from gateway.config import StatementQueryTool
from gateway.errors import Code, ToolError
from gateway.runtime import Gateway
from gateway.statements.model import READ


async def query(gw: Gateway, name: str, config: StatementQueryTool, args: dict[str, Any]) -> dict[str, Any]:
    """The read's rows, at most ``max_rows`` of them and ``max_bytes`` of JSON."""
    source = gw.config.statements[config.statements]
    statement = analysed(source, config.statements, frozenset({str(READ)}), args["sql"], "read")
    said = await read(gw.backend_for(name), gw.config.backend_of(name), source, statement.text)
    if not said.rows and said.count:
        raise ToolError(Code.BACKEND_ERROR, "The database answered the read as if it changed rows; tell the operator.")
    rows, cut = bounded(said.rows, config.max_rows, config.max_bytes)
    return {"statement": statement.text, "rows": rows, "rowCount": len(rows), "truncated": cut or said.cut}


def bounded(rows: list[dict[str, Any]], max_rows: int, max_bytes: int) -> tuple[list[dict[str, Any]], bool]:
    """The first rows that fit both bounds, and whether any were left out."""
    kept: list[dict[str, Any]] = []
    size = 2  # the brackets of the JSON array
    for row in rows[:max_rows]:
        size += len(json.dumps(row, ensure_ascii=False).encode()) + 1
        if size > max_bytes:
            return kept, True
        kept.append(row)
    return kept, len(rows) > len(kept)
