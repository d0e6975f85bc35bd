"""dbhub over a real PostgreSQL, wrapped by the shipped config alone (config/dbhub/gateway.toml), driven by real SDK
clients in both protocol eras through the whole flow: a read with no prompt, a previewed and confirmed write, its
replay, a stale plan, and every refusal the statement tools make, each asserting the database unchanged.

dbhub runs as a real child process of the gateway (two sources on one database, the second read-only, from a
dbhub.toml); the gateway runs in this process and its clients reach it in memory. tests/system/sqlservers/
test_statement_serve.py drives the same over a real ``serve`` process and HTTP."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from gateway.config import parse_config
from gateway.runtime import Gateway
from tests.support.clients import Answers, connect, error_body, error_code, new_key, running_gateway
from tests.support.sql_servers import contents, counts, dbhub_gateway_data

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
async def gw(shared_pg_database: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Gateway]:
    directory = tmp_path_factory.mktemp("dbhub-gateway")
    async with running_gateway(parse_config(dbhub_gateway_data(shared_pg_database, directory))) as running:
        yield running


def sql(database: str, statement: str) -> list[tuple[Any, ...]]:
    """Run a statement on the database directly (out of band), its rows if any."""
    with psycopg.connect(database, autocommit=True) as connection:
        cursor = connection.execute(statement.encode())
        return cursor.fetchall() if cursor.description is not None else []


def tenant(database: str, rows: int) -> str:
    """A tenant of this test's own with ``rows`` rows."""
    name = f"tn_{uuid.uuid4().hex[:8]}"
    sql(database, f"INSERT INTO tenants (id, name) VALUES ('{name}', 'T')")
    if rows:
        values = ", ".join(f"('{name}', 'p{n}')" for n in range(rows))
        sql(database, f"INSERT INTO rows (tenant_id, payload) VALUES {values}")
    return name


async def call(gw: Gateway, era: str, tool: str, answers: Any = None, **arguments: Any) -> Any:
    async with connect(gw, era, answers) as client:
        return await client.call_tool(tool, arguments)


async def test_reads_pass_without_a_prompt_through_the_read_only_source(
    gw: Gateway, shared_pg_database: str, era: str
) -> None:
    name, answers = tenant(shared_pg_database, 3), Answers()
    result = await call(
        gw, era, "query", answers, sql=f"select payload from rows where tenant_id = '{name}' order by 1"
    )
    assert not result.is_error, result.content
    assert result.structured_content == {
        "statement": f"SELECT payload FROM rows WHERE tenant_id = '{name}' ORDER BY 1",
        "rows": [{"payload": "p0"}, {"payload": "p1"}, {"payload": "p2"}],
        "rowCount": 3,
        "truncated": False,
    }
    assert answers.prompts == []


async def test_a_write_is_previewed_with_its_real_count_confirmed_run_once_and_replayed(
    gw: Gateway, shared_pg_database: str, era: str
) -> None:
    name = tenant(shared_pg_database, 0)
    statement = f"UPDATE tenants SET version = version + 1 WHERE id = '{name}'"
    preview = await call(gw, era, "preview_statement", sql=statement.lower().replace("update", "update "))
    plan = preview.structured_content
    assert (plan["statement"], plan["class"], plan["rows"], plan["written"]) == (statement, "update", 1, ["tenants"])
    assert len(plan["fingerprint"]) == 32 and plan["unit"] == "rows matched"
    answers, key = Answers(), new_key()
    done = await call(gw, era, "execute_statement", answers, planId=plan["planId"], idempotencyKey=key)
    assert not done.is_error, done.content
    assert (done.structured_content["rowsReported"], done.structured_content["countsAgree"]) == (1, True)
    assert answers.messages == [f"Update 1 row in tenants?\nThe statement, as it will run:\n{statement}"]
    again = await call(gw, era, "execute_statement", Answers(), planId=plan["planId"], idempotencyKey=key)
    assert again.structured_content == {**done.structured_content, "replayed": True}
    assert sql(shared_pg_database, f"SELECT version FROM tenants WHERE id = '{name}'") == [(2,)]  # once


async def test_a_plan_is_stale_when_its_rows_changed_even_at_the_same_count(
    gw: Gateway, shared_pg_database: str, era: str
) -> None:
    name = tenant(shared_pg_database, 4)
    plan = (
        await call(gw, era, "preview_statement", sql=f"DELETE FROM rows WHERE tenant_id = '{name}'")
    ).structured_content
    assert plan["rows"] == 4
    sql(
        shared_pg_database,
        f"UPDATE rows SET payload = 'moved' WHERE id = (SELECT min(id) FROM rows WHERE tenant_id = '{name}')",
    )
    before = counts(shared_pg_database)
    result = await call(gw, era, "execute_statement", Answers(), planId=plan["planId"], idempotencyKey=new_key())
    assert error_code(result) == "plan_stale"
    assert error_body(result)["details"] == {"rowsPlanned": 4, "rowsNow": 4}  # same count, other rows
    assert counts(shared_pg_database) == before


REFUSED = [
    ("query", "SELECT 1; DELETE FROM rows", "statement_refused", "several_statements"),
    ("query", "SELECT 1 AS a$b$; DELETE FROM rows; SELECT 1 AS c$b$", "statement_refused", "several_statements"),
    ("query", "SELECT E'\\'; DELETE FROM rows; SELECT \\'' AS x", "statement_refused", "semicolon"),
    ("query", "SELECT $$ ; DELETE FROM rows; $$", "statement_refused", "semicolon"),
    ("query", "SELECT 1 /* /* */ ; DELETE FROM rows", "statement_refused", "unparsable"),
    ("query", "SELEC * FROM rows", "statement_refused", "unparsable"),
    ("query", "SELECT * INTO copy FROM rows", "statement_refused", "hidden_write"),
    ("query", "EXPLAIN ANALYZE DELETE FROM rows", "statement_refused", "hidden_write"),
    ("query", "WITH d AS (DELETE FROM rows RETURNING *) SELECT * FROM d", "statement_refused", "hidden_write"),
    ("query", "DELETE FROM rows", "statement_refused", "not_a_read"),
    ("query", "SELECT nextval('rows_id_seq')", "statement_refused", "function_not_allowed"),
    ("query", "SELECT 1 \uff1bDELETE FROM rows", "statement_refused", "lookalike_characters"),
    ("query", 'SELECT * FROM "Tenant Notes"', "statement_refused", "table_not_allowed"),
    ("preview_statement", "TRUNCATE rows", "statement_refused", "class_not_allowed"),
    ("preview_statement", "DROP TABLE rows", "statement_refused", "class_not_allowed"),
    ("preview_statement", "ALTER TABLE rows ADD COLUMN x int", "statement_refused", "class_not_allowed"),
    ("preview_statement", 'DELETE FROM "Tenant Notes"', "statement_refused", "table_not_allowed"),
    ("preview_statement", "DELETE FROM rows USING pg_class WHERE false", "statement_refused", "table_not_allowed"),
    ("preview_statement", "SELECT * FROM rows", "statement_refused", "not_a_write"),
    ("preview_statement", "DELETE FROM rows WHERE id = 1 RETURNING *", "statement_refused", "not_measurable"),
    ("preview_statement", "DELETE FROM rows WHERE id = " + "1" * 20_000, "request_too_large", "too_long"),
    ("preview_statement", "DELETE FROM audit_log", "denied", None),
]


@pytest.mark.parametrize(("tool", "statement", "code", "reason"), REFUSED)
async def test_every_refusal_runs_nothing_and_leaves_the_database_unchanged(
    gw: Gateway, shared_pg_database: str, era: str, tool: str, statement: str, code: str, reason: str | None
) -> None:
    before = contents(shared_pg_database)
    result = await call(gw, era, tool, Answers(), sql=statement)
    assert error_code(result) == code
    if reason is not None:
        assert error_body(result)["details"]["reason"] == reason
    assert contents(shared_pg_database) == before


async def test_a_declined_write_runs_nothing(gw: Gateway, shared_pg_database: str, era: str) -> None:
    name = tenant(shared_pg_database, 2)
    plan = (
        await call(gw, era, "preview_statement", sql=f"DELETE FROM rows WHERE tenant_id = '{name}'")
    ).structured_content
    before = counts(shared_pg_database)
    result = await call(
        gw, era, "execute_statement", Answers("decline"), planId=plan["planId"], idempotencyKey=new_key()
    )
    assert error_code(result) == "not_confirmed"
    assert counts(shared_pg_database) == before


# Attacks: each was written as a test before the gateway answered it.


async def test_a_write_smuggled_through_a_function_in_a_select_is_refused_by_the_read_only_source(
    gw: Gateway, shared_pg_database: str, era: str
) -> None:
    """No parser sees inside a user-defined function: the read goes to dbhub's read-only source, whose read-only
    transaction refuses the DELETE inside it."""
    sql(
        shared_pg_database,
        "CREATE OR REPLACE FUNCTION tidy() RETURNS int LANGUAGE sql AS 'DELETE FROM rows RETURNING 1'",
    )
    before = counts(shared_pg_database)
    result = await call(gw, era, "query", sql="SELECT tidy()")
    assert error_code(result) == "backend_error"
    assert "read-only transaction" in error_body(result)["details"]["backendMessage"]
    measured = await call(gw, era, "preview_statement", sql="DELETE FROM tenants WHERE tidy() > 0")
    assert error_code(measured) == "backend_error"  # its measuring read runs in the read-only source too
    assert counts(shared_pg_database) == before


async def test_a_trigger_that_makes_the_write_touch_other_rows_than_measured_is_recorded_and_shown(
    gw: Gateway, shared_pg_database: str, era: str
) -> None:
    """A BEFORE trigger (beyond any parser's sight) skips a row: the server reports fewer rows than the preview
    counted, and the gateway says so in the answer and the audit entry instead of trusting either number."""
    sql(
        shared_pg_database,
        "CREATE OR REPLACE FUNCTION keep_pinned() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
        " IF OLD.payload = 'pinned' THEN RETURN NULL; END IF; RETURN OLD; END $$",
    )
    sql(
        shared_pg_database,
        "CREATE OR REPLACE TRIGGER keep BEFORE DELETE ON rows FOR EACH ROW EXECUTE FUNCTION keep_pinned()",
    )
    name = tenant(shared_pg_database, 2)
    sql(
        shared_pg_database,
        f"UPDATE rows SET payload = 'pinned' WHERE id = (SELECT min(id) FROM rows WHERE tenant_id = '{name}')",
    )
    plan = (
        await call(gw, era, "preview_statement", sql=f"DELETE FROM rows WHERE tenant_id = '{name}'")
    ).structured_content
    key = new_key()
    done = await call(gw, era, "execute_statement", Answers(), planId=plan["planId"], idempotencyKey=key)
    body = done.structured_content
    assert (body["rows"], body["rowsReported"], body["countsAgree"]) == (2, 1, False)
    entries = [entry async for entry in gw.store.audit_entries() if entry.idempotency_key == key]
    assert [(entry.outcome, entry.extra["rowsMeasured"], entry.extra["rowsReported"]) for entry in entries] == [
        ("applied", 2, 1)
    ]
    assert entries[0].extra["statement"] == plan["statement"] and entries[0].extra["digest"] == plan["digest"]
    assert sql(shared_pg_database, f"SELECT payload FROM rows WHERE tenant_id = '{name}'") == [("pinned",)]


async def test_a_function_the_config_marks_as_writing_is_refused_before_anything_is_sent(
    shared_pg_database: str, tmp_path: Path, era: str
) -> None:
    data = dbhub_gateway_data(shared_pg_database, tmp_path)
    data["statements"]["app"]["writing_functions"] = ["tidy"]
    before = counts(shared_pg_database)
    async with running_gateway(parse_config(data)) as gw:
        result = await call(gw, era, "query", sql="SELECT public.TIDY()")
    assert error_code(result) == "statement_refused"
    assert error_body(result)["details"]["reason"] == "function_not_allowed"
    assert counts(shared_pg_database) == before
