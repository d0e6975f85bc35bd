"""mcp-alchemy over a real SQLite file, wrapped by TOML alone (one tool for everything, text answers, no read-only
tool): query, preview, a confirmed execute, its replay and a refusal, in both protocol eras, with real SDK clients
and mcp-alchemy as a real child process of the gateway."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from gateway.config import parse_config
from tests.support.clients import Answers, connect, error_body, error_code, new_key, running_gateway
from tests.support.sql_servers import SEEDED, alchemy_gateway_data, contents, counts

pytestmark = pytest.mark.anyio


async def test_mcp_alchemy_wrapped_reads_previews_runs_once_replays_and_refuses(
    sqlite_file: Path, tmp_path: Path, era: str
) -> None:
    answers, key, before = Answers(), new_key(), contents(sqlite_file)
    async with running_gateway(parse_config(alchemy_gateway_data(sqlite_file, tmp_path))) as gw:

        async def call(tool: str, reply: Any = None, **arguments: Any) -> Any:
            async with connect(gw, era, reply) as client:
                return await client.call_tool(tool, arguments)

        read = await call("query", sql="SELECT id, name FROM tenants ORDER BY id")
        assert read.structured_content["rows"] == [
            {"id": "tn_a", "name": "Alpha"},
            {"id": "tn_b", "name": "NULL"},  # mcp-alchemy's text says NULL for NULL and 'NULL' alike
            {"id": "tn_p", "name": "Protected"},
        ]
        refused = await call("query", sql="VALUES (1)")
        assert error_code(refused) == "statement_refused"
        assert error_body(refused)["details"]["reason"] == "class_mismatch"
        several = await call("preview_statement", sql="DELETE FROM rows; DELETE FROM tenants")
        assert error_body(several)["details"]["reason"] == "several_statements"
        assert contents(sqlite_file) == before
        plan = (
            await call("preview_statement", sql="DELETE FROM rows WHERE payload IS NULL OR tenant_id = 'tn_a'")
        ).structured_content
        assert (plan["rows"], plan["class"], "fingerprint" in plan) == (6, "delete", False)
        done = await call("execute_statement", answers, planId=plan["planId"], idempotencyKey=key)
        assert (done.structured_content["rowsReported"], done.structured_content["countsAgree"]) == (6, True)
        again = await call("execute_statement", Answers(), planId=plan["planId"], idempotencyKey=key)
        assert again.structured_content == {**done.structured_content, "replayed": True}
    assert answers.messages[0].startswith("Delete 6 rows from rows?\n")
    assert counts(sqlite_file) == {**SEEDED, "rows": 2}


async def test_a_stale_plan_runs_nothing(sqlite_file: Path, tmp_path: Path, era: str) -> None:
    delete = {"sql": "DELETE FROM rows WHERE tenant_id = 'tn_b'"}
    async with (
        running_gateway(parse_config(alchemy_gateway_data(sqlite_file, tmp_path))) as gw,
        connect(gw, era, Answers()) as client,
    ):
        plan = (await client.call_tool("preview_statement", delete)).structured_content
        with sqlite3.connect(sqlite_file) as direct:
            direct.execute("DELETE FROM rows WHERE payload = 'b1'")
        direct.close()
        result = await client.call_tool("execute_statement", {"planId": plan["planId"], "idempotencyKey": new_key()})
    assert error_code(result) == "plan_stale"
    assert counts(sqlite_file) == {**SEEDED, "rows": 7}
