"""A statement-executing MCP server in the test process, over a real SQLite file, answering in dbhub's shape: the
unit tier's stand-in for dbhub (tests/system/sqlservers/ run the real one over PostgreSQL).

    execute_sql         runs any one statement (sqlite3 runs one statement per call, as mcp-alchemy's driver does)
    execute_sql_reader  runs it on a read-only connection (``mode=ro``), as dbhub's read-only source does
    Switches            what a dishonest or failing server does: report more rows than it changed, refuse writes,
                        answer a write in no shape or not at all; and every statement each tool was sent, in order

Its answers are dbhub's (tests/system/sqlservers/test_dbhub.py records them): ``{"success": true, "data":
{"statements": [{"sql", "rows", "count"}], "source_id"}}``, and ``isError`` with ``{"success": false, "error",
"code"}``.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp.server import Server, ServerRequestContext

from gateway.config import parse_config
from gateway.runtime import Gateway
from tests.support.clients import running_gateway

SQL = {"type": "object", "properties": {"sql": {"type": "string"}}, "required": ["sql"]}
TABLES = ["tenants", "rows", "audit_log", '"Tenant Notes"']


@dataclass
class Switches:
    """How the server behaves, and what it was sent."""

    extra_count: int = 0
    """Added to the count a write reports: a server that lies about what it changed."""
    refuse_writes: bool = False
    after_write: str | None = None
    """What the writing tool does once it committed: ``garble`` (answer text in no shape) or ``drop`` (answer
    nothing: the call fails as a lost connection does)."""
    sent: list[tuple[str, str]] = field(default_factory=list)
    """(tool, sql) of every call, in order."""

    def writes(self) -> list[str]:
        """The statements sent to the writing tool."""
        return [sql for tool, sql in self.sent if tool == "execute_sql"]


def server(database: Path, switches: Switches) -> Server[Any]:
    """The server over ``database``."""

    async def on_list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        hints = types.ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False)
        return types.ListToolsResult(
            tools=[
                types.Tool(name="execute_sql", description="Execute SQL.", input_schema=SQL),
                types.Tool(name="execute_sql_reader", description="Read.", input_schema=SQL, annotations=hints),
            ]
        )

    async def on_call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        sql = str((params.arguments or {}).get("sql", ""))
        switches.sent.append((params.name, sql))
        reader = params.name == "execute_sql_reader"
        if switches.refuse_writes and not reader:
            return _failed("permission denied")
        try:
            rows, count = _run(database, sql, reader)
        except sqlite3.Error as exc:
            return _failed(str(exc))
        if not reader and switches.after_write == "drop":
            raise RuntimeError("the connection dropped after the write")
        if not reader and switches.after_write == "garble":
            return types.CallToolResult(content=[types.TextContent(type="text", text="done, probably")])
        if not rows:
            count += switches.extra_count
        body = {"success": True, "data": {"statements": [{"sql": sql, "rows": rows, "count": count}], "source_id": "x"}}
        return types.CallToolResult(content=[types.TextContent(type="text", text=json.dumps(body))])

    return Server("sql-double", on_list_tools=on_list_tools, on_call_tool=on_call_tool)


def _run(database: Path, sql: str, reader: bool) -> tuple[list[dict[str, Any]], int]:
    uri = f"file:{database}?mode=ro" if reader else f"file:{database}"
    connection = sqlite3.connect(uri, uri=True)
    try:
        cursor = connection.execute(sql)
        if cursor.description is None:
            connection.commit()
            return [], max(cursor.rowcount, 0)
        columns = [column[0] for column in cursor.description]
        rows = [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]
        connection.commit()
        return rows, len(rows)
    finally:
        connection.close()


def _failed(error: str) -> types.CallToolResult:
    body = {"success": False, "error": error, "code": "EXECUTION_ERROR"}
    return types.CallToolResult(content=[types.TextContent(type="text", text=json.dumps(body))], is_error=True)


def config_data(state_dir: Path, **execute: Any) -> dict[str, Any]:
    """A gateway over the double: its three statement tools on SQLite, ``execute`` added to the execute tool."""
    return {
        "gateway": {"store": "memory", "state_dir": str(state_dir)},
        "backend": {"transport": "stdio", "command": "unused"},
        "rate_limits": {"per_caller": {"per_second": 1e9, "burst": 1_000_000_000}},
        "statements": {
            "db": {
                "tool": "execute_sql",
                "read_tool": "execute_sql_reader",
                "dialect": "sqlite",
                "answers": "dbhub",
                "tables": TABLES,
                "max_length": 2000,
            }
        },
        "tools": {
            "query": {"kind": "statement_query", "statements": "db", "max_rows": 4, "max_bytes": 4096},
            "preview_statement": {"kind": "statement_preview", "statements": "db"},
            "execute_statement": {"kind": "statement_execute", "preview": "preview_statement", **execute},
        },
    }


@asynccontextmanager
async def sql_gateway(data: dict[str, Any], database: Path, switches: Switches) -> AsyncIterator[Gateway]:
    """A gateway (config ``data``) over the double on ``database``, reached in memory."""
    from mcp import Client

    double = server(database, switches)
    async with running_gateway(parse_config(data), opener=lambda: Client(double, mode="legacy")) as gw:
        yield gw
