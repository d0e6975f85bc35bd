"""``mcp-alchemy`` (PyPI) over a real SQLite file, driven by the real MCP SDK client: a statement-executing server
of another shape than dbhub. What it publishes and exactly what it answers.

It answers text, never an error flag: every answer is a success whose text (also its structuredContent
``{"result": text}``) is one of

    rows        "1. row\\n<column>: <value>\\n...\\n\\n2. row\\n...\\n\\nResult: <n> rows"   (NULL and 'NULL' alike)
    truncated   the rows that fit in 4,000 characters, then "Result: showing first <n> rows (output truncated)"
    none        "No rows returned"
    a write     "Success: <n> rows affected"
    an error    "Error: (<driver exception>) <message>\\n[SQL: <statement>]\\n(Background on this error at: ...)"

So a count is read from the line ``<column>: <n>`` of row 1, and a write's count from the ``Success`` line; an
answer starting with ``Error:`` is a failure. Statements reach SQLite through SQLAlchemy's ``text()``, which takes
``:name`` as a bind parameter even inside a string literal: without ``params`` such a statement fails, unrun.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.types import TextContent

from gateway.statements.analysis import analyse
from gateway.statements.model import Dialect
from gateway.statements.rules import Rules
from tests.support.sql_servers import SEEDED, alchemy_params, connected, counts

pytestmark = pytest.mark.anyio
CALL_TIMEOUT = 30.0


async def execute(client: Client, query: str) -> str:
    """One ``execute_query`` call: its text (after checking the answer's envelope: never an error flag)."""
    with anyio.fail_after(CALL_TIMEOUT):
        result = await client.call_tool("execute_query", {"query": query})
    assert not result.is_error
    assert len(result.content) == 1 and isinstance(result.content[0], TextContent)
    text = result.content[0].text
    assert result.structured_content == {"result": text}
    return text


async def test_mcp_alchemy_publishes_an_unannotated_query_tool_among_schema_reads(
    sqlite_file: Path, tmp_path: Path
) -> None:
    with (tmp_path / "alchemy.log").open("w") as errlog:
        async with connected(alchemy_params(sqlite_file), errlog) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert set(tools) == {"all_table_names", "filter_table_names", "schema_definitions", "execute_query"}
    execute_query = tools["execute_query"]
    assert execute_query.input_schema["properties"] == {
        "query": {"title": "Query", "type": "string"},
        "params": {"additionalProperties": True, "default": {}, "title": "Params", "type": "object"},
    }
    assert execute_query.input_schema["required"] == ["query"]
    assert execute_query.annotations is None
    assert execute_query.output_schema is not None
    assert execute_query.output_schema["properties"] == {"result": {"title": "Result", "type": "string"}}


async def test_reads_writes_and_errors_all_answer_text(sqlite_file: Path, tmp_path: Path) -> None:
    with (tmp_path / "alchemy.log").open("w") as errlog:
        async with connected(alchemy_params(sqlite_file), errlog) as client:
            read = await execute(client, "SELECT id, name FROM tenants ORDER BY id")
            counted = await execute(client, "SELECT COUNT(*) AS n FROM rows")
            nothing = await execute(client, "SELECT id FROM tenants WHERE 0")
            deleted = await execute(client, "DELETE FROM rows WHERE tenant_id = 'tn_b'")
            several = await execute(client, "DELETE FROM rows; SELECT 1")
            missing = await execute(client, "SELECT * FROM nope")
            bound = await execute(client, "DELETE FROM rows WHERE payload = ' :x'")
            long = await execute(
                client, "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 900) SELECT i FROM n"
            )
    assert read == (
        "1. row\nid: tn_a\nname: Alpha\n\n2. row\nid: tn_b\nname: NULL\n\n3. row\nid: tn_p\nname: Protected\n\n"
        "Result: 3 rows"
    )
    assert counted == "1. row\nn: 8\n\nResult: 1 rows"
    assert nothing == "No rows returned"
    assert deleted == "Success: 3 rows affected"
    assert several.startswith(
        "Error: (sqlite3.ProgrammingError) You can only execute one statement at a time.\n"
        "[SQL: DELETE FROM rows; SELECT 1]"
    )
    assert missing.startswith("Error: (sqlite3.OperationalError) no such table: nope\n[SQL: SELECT * FROM nope]")
    assert bound == (  # the statement SQLAlchemy made of it: the string literal's ':x' became a placeholder
        "Error: (sqlalchemy.exc.InvalidRequestError) A value is required for bind parameter 'x'\n"
        "[SQL: DELETE FROM rows WHERE payload = ' ?']\n[parameters: [{}]]\n"
        "(Background on this error at: https://sqlalche.me/e/20/cd3x)"
    )
    assert long.endswith("Result: showing first 248 rows (output truncated)") and len(long) <= 4_100
    assert counts(sqlite_file) == {**SEEDED, "rows": 5}


async def test_the_measuring_read_of_a_sqlite_write_runs_through_it(sqlite_file: Path, tmp_path: Path) -> None:
    statement = analyse("DELETE FROM rows WHERE payload IS NULL OR tenant_id = 'tn_a'", Rules(Dialect.SQLITE))
    assert statement.measure is not None and statement.measure.count_sql is not None
    with (tmp_path / "alchemy.log").open("w") as errlog:
        async with connected(alchemy_params(sqlite_file), errlog) as client:
            count = await execute(client, statement.measure.count_sql)
            done = await execute(client, statement.text)
    assert count == "1. row\nCOUNT(*): 6\n\nResult: 1 rows"
    assert done == "Success: 6 rows affected"
