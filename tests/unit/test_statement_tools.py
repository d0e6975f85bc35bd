"""A statement-executing server wrapped by TOML alone: its query, preview and execute tools, in both protocol eras,
against a real SQLite file behind an in-process server that answers as dbhub does (tests/support/sql_double.py).

Every refusal is asserted twice: by its code and reason, and by the database (nothing changed) and the server's
log of what it was sent (nothing written)."""

from __future__ import annotations

import sqlite3
import tomllib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gateway.config import load_config, parse_config
from gateway.runtime import Gateway
from tests.support.clients import ERAS, Answers, connect, error_body, error_code, new_key
from tests.support.processes import ROOT
from tests.support.sql_double import Switches, config_data, sql_gateway
from tests.support.sql_servers import SEEDED, contents, counts

pytestmark = pytest.mark.anyio

DELETE_B = "DELETE FROM rows WHERE tenant_id = 'tn_b'"


@pytest.fixture
async def gw(tmp_path: Path, database: Path, switches: Switches) -> AsyncIterator[Gateway]:
    async with sql_gateway(config_data(tmp_path / "state"), database, switches) as running:
        yield running


async def call(gw: Gateway, era: str, tool: str, answers: Any = None, **arguments: Any) -> Any:
    async with connect(gw, era, answers) as client:
        return await client.call_tool(tool, arguments)


async def test_the_three_tools_are_published_with_honest_hints_and_strict_schemas(gw: Gateway) -> None:
    async with connect(gw, "2026-07-28") as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert set(tools) == {"query", "preview_statement", "execute_statement"}
    hints = {name: tool.annotations for name, tool in tools.items()}
    assert hints["query"] is not None and hints["query"].read_only_hint is True
    assert hints["preview_statement"] is not None and hints["preview_statement"].read_only_hint is True
    execute = hints["execute_statement"]
    assert execute is not None and (execute.read_only_hint, execute.destructive_hint, execute.idempotent_hint) == (
        False,
        True,
        True,
    )
    assert tools["execute_statement"].input_schema["required"] == ["planId", "idempotencyKey"]
    assert tools["query"].input_schema["additionalProperties"] is False
    output = tools["query"].output_schema
    assert output is not None and output["properties"]["rows"]["maxItems"] == 4


@pytest.mark.parametrize("era", ERAS)
async def test_a_read_is_relayed_to_the_read_tool_bounded_and_flagged_when_cut(
    gw: Gateway, switches: Switches, era: str
) -> None:
    result = await call(gw, era, "query", sql="select id from tenants order by id")
    assert not result.is_error, result.content
    assert result.structured_content == {
        "statement": "SELECT id FROM tenants ORDER BY id",
        "rows": [{"id": "tn_a"}, {"id": "tn_b"}, {"id": "tn_p"}],
        "rowCount": 3,
        "truncated": False,
    }
    many = await call(gw, era, "query", sql="SELECT * FROM rows")
    assert many.structured_content["rowCount"] == 4 and many.structured_content["truncated"] is True
    assert [tool for tool, _ in switches.sent] == ["execute_sql_reader", "execute_sql_reader"]


@pytest.mark.parametrize("era", ERAS)
async def test_a_previewed_delete_runs_once_after_a_yes_and_a_retry_replays_it(
    gw: Gateway, database: Path, switches: Switches, era: str
) -> None:
    preview = await call(gw, era, "preview_statement", sql="delete from rows where tenant_id = 'tn_b'")
    plan = preview.structured_content
    assert plan["statement"] == DELETE_B and plan["class"] == "delete" and plan["rows"] == 3
    assert plan["tables"] == ["rows"] and plan["digest"].startswith("sha256:") and plan["approval"] == {"mode": "form"}
    assert counts(database) == SEEDED
    answers, key = Answers(), new_key()
    done = await call(gw, era, "execute_statement", answers, planId=plan["planId"], idempotencyKey=key)
    assert not done.is_error, done.content
    body = done.structured_content
    assert (body["rowsReported"], body["countsAgree"], body["replayed"]) == (3, True, False)
    assert answers.messages == [f"Delete 3 rows from rows?\nThe statement, as it will run:\n{DELETE_B}"]
    assert counts(database) == {**SEEDED, "rows": 5}
    again = await call(gw, era, "execute_statement", Answers(), planId=plan["planId"], idempotencyKey=key)
    assert again.structured_content == {**body, "replayed": True}
    assert switches.writes() == [DELETE_B]


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize(
    ("tool", "sql", "reason"),
    [
        ("query", "SELECT 1; DELETE FROM rows", "several_statements"),
        ("query", "SELECT 1 /* ; */; DELETE FROM rows", "several_statements"),
        ("query", "SELECT ';' AS x; DELETE FROM rows", "several_statements"),
        ("query", "SELEC id FROM tenants", "unparsable"),
        ("query", DELETE_B, "not_a_read"),
        ("query", "WITH d AS (DELETE FROM rows RETURNING 1) SELECT * FROM d", "hidden_write"),
        ("query", "SELECT * FROM sqlite_master", "table_not_allowed"),
        ("query", "SELECT load_extension('x')", "function_not_allowed"),
        ("preview_statement", "SELECT * FROM tenants", "not_a_write"),
        ("preview_statement", "DROP TABLE rows", "class_not_allowed"),
        ("preview_statement", "DELETE FROM secrets", "table_not_allowed"),
        ("preview_statement", "DELETE FROM rows WHERE tenant_id = 'tn_b' RETURNING id", "not_measurable"),
    ],
)
async def test_a_refused_statement_sends_nothing_and_changes_nothing(
    gw: Gateway, database: Path, switches: Switches, era: str, tool: str, sql: str, reason: str
) -> None:
    before = contents(database)
    result = await call(gw, era, tool, sql=sql)
    assert error_code(result) == "statement_refused"
    assert error_body(result)["details"]["reason"] == reason
    assert switches.sent == [] and contents(database) == before


@pytest.mark.parametrize("era", ERAS)
async def test_a_statement_past_the_size_limit_is_too_large(gw: Gateway, switches: Switches, era: str) -> None:
    result = await call(gw, era, "query", sql="SELECT id FROM tenants WHERE id = '" + "x" * 2000 + "'")
    assert error_code(result) == "request_too_large"
    assert error_body(result)["details"] == {"reason": "too_long", "limit": 2000, "setting": "statements.db.max_length"}
    assert switches.sent == []


@pytest.mark.parametrize("era", ERAS)
async def test_a_plan_whose_rows_moved_is_stale_and_nothing_runs(
    gw: Gateway, database: Path, switches: Switches, era: str
) -> None:
    plan = (await call(gw, era, "preview_statement", sql=DELETE_B)).structured_content
    with sqlite3.connect(database) as direct:
        direct.execute("INSERT INTO rows (tenant_id, payload) VALUES ('tn_b', 'b4')")
    result = await call(gw, era, "execute_statement", Answers(), planId=plan["planId"], idempotencyKey=new_key())
    assert error_code(result) == "plan_stale"
    assert error_body(result)["details"] == {"rowsPlanned": 3, "rowsNow": 4}
    assert switches.writes() == [] and counts(database) == {**SEEDED, "rows": 9}


@pytest.mark.parametrize("era", ERAS)
async def test_a_server_that_lies_about_its_count_is_recorded_and_shown(
    gw: Gateway, switches: Switches, era: str
) -> None:
    switches.extra_count = 100
    plan = (await call(gw, era, "preview_statement", sql=DELETE_B)).structured_content
    done = await call(gw, era, "execute_statement", Answers(), planId=plan["planId"], idempotencyKey=new_key())
    body = done.structured_content
    assert (body["rows"], body["rowsReported"], body["countsAgree"]) == (3, 103, False)
    entries = [entry async for entry in gw.store.audit_entries()]
    applied = [entry for entry in entries if entry.outcome == "applied"]
    assert len(applied) == 1
    extra = applied[0].extra
    assert (extra["statement"], extra["rowsMeasured"], extra["rowsReported"], extra["countsAgree"]) == (
        DELETE_B,
        3,
        103,
        False,
    )
    assert extra["digest"] == plan["digest"] and applied[0].version_before is None


def test_the_configs_defaults_are_the_analysis_own() -> None:
    """gateway.config keeps the statement analysis (and its parsers) unloaded until a config has statements, so it
    spells two of its facts itself: they must stay the analysis's."""
    from gateway.config import statements as config
    from gateway.statements.model import StatementClass
    from gateway.statements.rules import MAX_LENGTH

    assert config.MAX_LENGTH == MAX_LENGTH
    assert [str(kind) for kind in StatementClass if kind.writes] == config.CLASSES


def test_the_readme_shows_the_shipped_dbhub_config_as_it_is_and_it_loads() -> None:
    readme = (ROOT / "README.md").read_text()
    for name in ("gateway.toml", "dbhub.toml"):
        shipped = (ROOT / "config" / "dbhub" / name).read_text()
        assert f"```toml\n{shipped}```" in readme, f"the README's copy of config/dbhub/{name} is not the file"
    config = load_config(ROOT / "config" / "dbhub" / "gateway.toml")
    assert {name: tool.kind for name, tool in config.tools.items()} == {
        "query": "statement_query",
        "preview_statement": "statement_preview",
        "execute_statement": "statement_execute",
    }


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("after_write", ["drop", "garble"])
async def test_a_write_whose_answer_is_lost_or_garbled_is_unknown_and_never_sent_again(
    gw: Gateway, database: Path, switches: Switches, era: str, after_write: str
) -> None:
    switches.after_write = after_write
    plan = (await call(gw, era, "preview_statement", sql=DELETE_B)).structured_content
    args, key = {"planId": plan["planId"]}, new_key()
    first = await call(gw, era, "execute_statement", Answers(), **args, idempotencyKey=key)
    again = await call(gw, era, "execute_statement", Answers(), **args, idempotencyKey=key)
    assert (error_code(first), error_code(again)) == ("outcome_unknown", "outcome_unknown")
    assert switches.writes() == [DELETE_B] and counts(database) == {**SEEDED, "rows": 5}
    unknown = [entry async for entry in gw.store.audit_entries() if entry.outcome == "unknown"]
    assert len(unknown) == 2 and unknown[0].extra["statement"] == DELETE_B


@pytest.mark.parametrize("era", ERAS)
async def test_a_write_the_server_refuses_is_a_backend_error_a_retry_replays(
    gw: Gateway, database: Path, switches: Switches, era: str
) -> None:
    switches.refuse_writes = True
    plan = (await call(gw, era, "preview_statement", sql=DELETE_B)).structured_content
    args = {"planId": plan["planId"], "idempotencyKey": new_key()}
    first = await call(gw, era, "execute_statement", Answers(), **args)
    again = await call(gw, era, "execute_statement", Answers(), **args)
    assert (error_code(first), error_code(again)) == ("backend_error", "backend_error")
    assert error_body(first)["details"] == {"backendMessage": "permission denied"}
    assert switches.writes() == [DELETE_B] and counts(database) == SEEDED


def test_a_postgresql_source_without_a_read_only_tool_is_warned_about() -> None:
    data = tomllib.loads((ROOT / "config" / "dbhub" / "gateway.toml").read_text())
    assert parse_config(data).statement_warnings() == []
    del data["statements"]["app"]["read_tool"]
    (warning,) = parse_config(data).statement_warnings()
    assert warning.startswith("statements.app: no read_tool: ")
