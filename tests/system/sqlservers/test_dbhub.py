"""``@bytebase/dbhub`` 1.4.0 over a real PostgreSQL, driven by the real MCP SDK client: what it publishes and
exactly what it answers, for reads, writes, several statements and errors. The statement tool kind wraps these
answers, so a change in any of them must show here first.

What it answers (``execute_sql {sql}``, one JSON text block, no structuredContent):

    success   {"success": true, "data": {"statements": [{"sql", "rows": [{column: value}], "count"}],
               "source_id": "default"}}   count: rows returned, or rows a write changed
    failure   isError, {"success": false, "error": <the server's message>, "code": "EXECUTION_ERROR"}

Values come as node-postgres gives them: an int4 as a number, a bigint (``count(*)``) as a string, NULL as null.
It splits the text into statements with a lexer of its own: several statements run in one transaction, a lone
one runs as it is, through PostgreSQL's simple protocol, which runs every statement in the text. With a
dbhub.toml of two sources on one database, one of them read-only, it publishes ``execute_sql_<source>`` per
source, and the read-only one refuses writes by keyword (code ``READONLY_VIOLATION``) and runs the rest in a
read-only transaction.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import psycopg
import pytest
from mcp import Client
from mcp.types import CallToolResult, TextContent

from gateway.statements.analysis import analyse
from gateway.statements.model import Dialect
from gateway.statements.refusals import Refusal, StatementRefused
from gateway.statements.rules import Rules
from tests.support.sql_servers import SEEDED, connected, counts, dbhub_params, dbhub_split_params

pytestmark = pytest.mark.anyio
CALL_TIMEOUT = 30.0


async def execute(client: Client, sql: str, tool: str = "execute_sql") -> tuple[bool, dict[str, Any]]:
    """One ``execute_sql`` call: its error flag and its JSON answer (after checking the answer's envelope)."""
    with anyio.fail_after(CALL_TIMEOUT):
        result: CallToolResult = await client.call_tool(tool, {"sql": sql})
    assert result.structured_content is None
    assert len(result.content) == 1 and isinstance(result.content[0], TextContent)
    return result.is_error, json.loads(result.content[0].text)


def answered(*statements: dict[str, Any]) -> dict[str, Any]:
    return {"success": True, "data": {"statements": list(statements), "source_id": "default"}}


def failed(error: str) -> dict[str, Any]:
    return {"success": False, "error": error, "code": "EXECUTION_ERROR"}


async def test_dbhub_publishes_one_destructive_tool_for_every_statement(pg_database: str, tmp_path: Path) -> None:
    with (tmp_path / "dbhub.log").open("w") as errlog:
        async with connected(dbhub_params(pg_database), errlog) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert set(tools) == {"execute_sql", "search_objects"}
    execute_sql = tools["execute_sql"]
    assert execute_sql.input_schema["properties"] == {
        "sql": {"type": "string", "description": "SQL to execute (multiple statements separated by ;)"}
    }
    assert execute_sql.input_schema["required"] == ["sql"]
    assert execute_sql.output_schema is None
    hints = execute_sql.annotations
    assert hints is not None
    assert (hints.read_only_hint, hints.destructive_hint, hints.idempotent_hint, hints.open_world_hint) == (
        False,
        True,
        False,
        False,
    )


async def test_a_read_answers_its_rows_and_a_write_the_rows_it_changed(pg_database: str, tmp_path: Path) -> None:
    with (tmp_path / "dbhub.log").open("w") as errlog:
        async with connected(dbhub_params(pg_database), errlog) as client:
            read = await execute(client, "SELECT id, name, version FROM tenants ORDER BY id")
            counted = await execute(client, "SELECT count(*) FROM rows WHERE tenant_id = 'tn_b'")
            nothing = await execute(client, "SELECT id FROM tenants WHERE false")
            deleted = await execute(client, "DELETE FROM rows WHERE tenant_id = 'tn_b'")
            updated = await execute(client, "UPDATE tenants SET version = version + 1 WHERE id <> 'tn_p'")
            inserted = await execute(client, "INSERT INTO audit_log (tenant_id, action) VALUES ('tn_a', 'x')")
            empty = await execute(client, "")
    sql = "SELECT id, name, version FROM tenants ORDER BY id"
    rows = [
        {"id": "tn_a", "name": "Alpha", "version": 1},
        {"id": "tn_b", "name": None, "version": 1},
        {"id": "tn_p", "name": "Protected", "version": 1},
    ]
    assert read == (False, answered({"sql": sql, "rows": rows, "count": 3}))
    count_sql = "SELECT count(*) FROM rows WHERE tenant_id = 'tn_b'"
    assert counted == (False, answered({"sql": count_sql, "rows": [{"count": "3"}], "count": 1}))  # bigint: a string
    assert nothing == (False, answered({"sql": "SELECT id FROM tenants WHERE false", "rows": [], "count": 0}))
    assert deleted == (False, answered({"sql": "DELETE FROM rows WHERE tenant_id = 'tn_b'", "rows": [], "count": 3}))
    assert updated[1]["data"]["statements"][0]["count"] == 2
    assert inserted[1]["data"]["statements"][0]["count"] == 1
    assert empty == (False, answered())
    assert counts(pg_database) == {**SEEDED, "rows": 5, "audit_log": 3}


async def test_several_statements_run_in_one_transaction_and_a_failure_undoes_them_all(
    pg_database: str, tmp_path: Path
) -> None:
    with (tmp_path / "dbhub.log").open("w") as errlog:
        async with connected(dbhub_params(pg_database), errlog) as client:
            both = await execute(client, "SELECT 1 AS a; SELECT 2 AS b")
            undone = await execute(client, "DELETE FROM rows WHERE tenant_id = 'tn_b'; SELEC 1")
            missing = await execute(client, "SELECT * FROM nope")
    assert both == (
        False,
        answered(
            {"sql": "SELECT 1 AS a", "rows": [{"a": 1}], "count": 1},
            {"sql": "SELECT 2 AS b", "rows": [{"b": 2}], "count": 1},
        ),
    )
    assert undone == (True, failed('syntax error at or near "SELEC"'))
    assert missing == (True, failed('relation "nope" does not exist'))
    assert counts(pg_database) == SEEDED


async def test_the_measuring_reads_run_through_dbhub_and_answer_in_its_shape(pg_database: str, tmp_path: Path) -> None:
    statement = analyse(
        "DELETE FROM rows r USING tenants t WHERE r.tenant_id = t.id AND t.name IS NULL", Rules(Dialect.POSTGRES)
    )
    assert statement.measure is not None and statement.measure.count_sql and statement.measure.fingerprint_sql
    with (tmp_path / "dbhub.log").open("w") as errlog:
        async with connected(dbhub_params(pg_database), errlog) as client:
            _, count = await execute(client, statement.measure.count_sql)
            _, fingerprint = await execute(client, statement.measure.fingerprint_sql)
            _, done = await execute(client, statement.text)
    assert count["data"]["statements"][0]["rows"] == [{"count": "3"}]
    (measured,) = fingerprint["data"]["statements"][0]["rows"]
    assert measured["rows"] == "3" and len(measured["fingerprint"]) == 32
    assert done["data"]["statements"][0]["count"] == 3


async def test_dbhubs_own_splitter_disagrees_with_postgresql_and_only_the_analysis_refuses_both_ways(
    pg_database: str, tmp_path: Path
) -> None:
    """dbhub's lexer reads ``a$b$`` (an identifier to PostgreSQL) as a dollar quote, so it sends three statements
    as one; PostgreSQL runs all three, the DELETE commits, and dbhub answers an error. It does not know ``E''``
    strings either, so it cuts one statement in two (which then fails, in a transaction, changing nothing)."""
    smuggled = "SELECT 1 AS a$b$; DELETE FROM rows WHERE tenant_id = 'tn_b'; SELECT 1 AS c$b$"
    escaped = "SELECT E'\\'; DELETE FROM rows WHERE id = 1; SELECT \\'' AS x"
    with psycopg.connect(pg_database, autocommit=True) as direct:
        one = direct.execute(escaped.encode()).fetchall()
    assert one == [("'; DELETE FROM rows WHERE id = 1; SELECT '",)]  # to PostgreSQL: one harmless SELECT
    with (tmp_path / "dbhub.log").open("w") as errlog:
        async with connected(dbhub_params(pg_database), errlog) as client:
            ran = await execute(client, smuggled)
            assert counts(pg_database)["rows"] == SEEDED["rows"] - 3  # the smuggled DELETE ran
            cut = await execute(client, escaped)
    assert ran[0] is True and ran[1]["success"] is False  # ... and dbhub says it failed
    assert cut == (True, failed("unterminated quoted string at or near \"E'\\'\""))
    assert counts(pg_database)["rows"] == SEEDED["rows"] - 3
    for sql, reason in ((smuggled, Refusal.SEVERAL_STATEMENTS), (escaped, Refusal.SEMICOLON)):
        with pytest.raises(StatementRefused) as refused:
            analyse(sql, Rules(Dialect.POSTGRES))
        assert refused.value.reason == reason


async def test_a_read_only_source_refuses_what_writes_by_keyword_or_in_the_server(
    pg_database: str, tmp_path: Path
) -> None:
    """Defence in depth for the query tool: a second source on the same database, marked read-only in dbhub.toml.
    dbhub refuses a leading keyword other than SELECT, WITH, EXPLAIN, SHOW, and PostgreSQL refuses a write inside
    its read-only transaction (nextval here, which a keyword check cannot see)."""
    with (tmp_path / "dbhub.log").open("w") as errlog:
        async with connected(dbhub_split_params(pg_database, tmp_path), errlog) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            read = await execute(client, "SELECT count(*) FROM rows", "execute_sql_reader")
            keyword = await execute(client, "DELETE FROM rows", "execute_sql_reader")
            hidden = await execute(
                client, "WITH d AS (DELETE FROM rows RETURNING 1) SELECT * FROM d", "execute_sql_reader"
            )
            sequence = await execute(client, "SELECT nextval('rows_id_seq')", "execute_sql_reader")
            written = await execute(client, "DELETE FROM rows WHERE tenant_id = 'tn_b'", "execute_sql_main")
    assert set(tools) == {"execute_sql_main", "search_objects_main", "execute_sql_reader"}
    reader_hints = tools["execute_sql_reader"].annotations
    assert reader_hints is not None and reader_hints.read_only_hint is True
    assert read[1]["data"] == {
        "statements": [{"sql": "SELECT count(*) FROM rows", "rows": [{"count": "8"}], "count": 1}],
        "source_id": "reader",
    }
    refused = "Read-only mode is enabled. Only the following SQL operations are allowed: select, with, explain, show"
    assert keyword == (True, {"success": False, "error": refused, "code": "READONLY_VIOLATION"})
    assert hidden == keyword
    assert sequence == (True, failed("cannot execute nextval() in a read-only transaction"))
    assert written[1]["data"]["statements"][0]["count"] == 3 and written[1]["data"]["source_id"] == "main"
    assert counts(pg_database) == {**SEEDED, "rows": 5}
