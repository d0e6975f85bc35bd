"""The shipped dbhub config served by a real ``serve`` process, dbhub its child over a real PostgreSQL: real SDK
clients of both protocol eras over streamable HTTP, the terminal client at a real pseudo-terminal (the person sees
the normalised statement under the gateway's own words), and the audit as ``audit list`` prints it."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import anyio
import psycopg
import pytest

from tests.support.clients import ERAS, Answers, http_client, new_key
from tests.support.configs import write_toml
from tests.support.processes import audit_list, free_port, serve
from tests.support.sql_servers import SEEDED, counts, dbhub_gateway_data
from tests.support.terminal import at_a_terminal

pytestmark = pytest.mark.anyio


async def test_a_served_dbhub_reads_previews_and_runs_a_statement_once_in_both_eras(
    pg_database: str, tmp_path: Path
) -> None:
    config = write_toml(
        dbhub_gateway_data(pg_database, tmp_path, store="sqlite:{state_dir}/gateway.db"), tmp_path / "gateway.toml"
    )
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    keys = {}
    async with serve(config, port):
        for era, tenant in zip(ERAS, ("tn_a", "tn_b"), strict=True):
            answers, key = Answers(), new_key()
            async with http_client(era, url, answers) as client:
                read = await client.call_tool("query", {"sql": "SELECT count(*) AS n FROM rows"})
                expected = [{"n": str(counts(pg_database)["rows"])}]  # a bigint: dbhub says it as a string
                assert read.structured_content is not None and read.structured_content["rows"] == expected
                preview = await client.call_tool(
                    "preview_statement", {"sql": f"DELETE FROM rows WHERE tenant_id = '{tenant}'"}
                )
                plan = preview.structured_content
                assert plan is not None
                arguments = {"planId": plan["planId"], "idempotencyKey": key}
                done = await client.call_tool("execute_statement", arguments)
                again = await client.call_tool("execute_statement", arguments)
            assert done.structured_content is not None and again.structured_content is not None
            assert done.structured_content["rowsReported"] == plan["rows"]
            assert again.structured_content == {**done.structured_content, "replayed": True}
            assert len(answers.prompts) == 1 and plan["statement"] in answers.messages[0]
            keys[key] = plan
    assert counts(pg_database) == {**SEEDED, "rows": 0}
    entries = [entry for entry in await audit_list(config) if entry.get("idempotency_key") in keys]
    applied = [entry for entry in entries if entry["outcome"] == "applied"]
    assert len(applied) == 2 and {entry["outcome"] for entry in entries} == {"applied", "replayed"}
    for entry in applied:
        plan = keys[entry["idempotency_key"]]
        assert entry["extra"]["statement"] == plan["statement"] and entry["extra"]["digest"] == plan["digest"]
        assert (entry["extra"]["rowsMeasured"], entry["extra"]["rowsReported"]) == (plan["rows"], plan["rows"])


async def test_the_person_at_the_terminal_sees_the_statement_in_the_gateways_words(
    pg_database: str, tmp_path: Path
) -> None:
    config = write_toml(dbhub_gateway_data(pg_database, tmp_path), tmp_path / "gateway.toml")
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"

    def call(*words: str) -> list[str]:
        return [sys.executable, "-m", "gateway", "call", *words, "--url", url]

    async with serve(config, port):
        previewed = await anyio.run_process(call("preview_statement", "sql=DELETE FROM rows WHERE tenant_id = 'tn_a'"))
        plan_id = re.search(r"planId: (pl_\S+)", previewed.stdout.decode())
        assert plan_id is not None, previewed.stdout
        code, screen = await anyio.to_thread.run_sync(
            lambda: at_a_terminal(
                call("execute_statement", f"planId={plan_id.group(1)}", "idempotencyKey=terminal-statement-1"),
                {"PATH": "/usr/bin:/bin"},
                ["y"],
            )
        )
    assert code == 0, screen
    assert "Delete 5 rows from rows?" in screen
    assert "DELETE FROM rows WHERE tenant_id = 'tn_a'" in screen
    with psycopg.connect(pg_database) as connection:
        assert connection.execute("SELECT count(*) FROM rows WHERE tenant_id = 'tn_a'").fetchone() == (0,)
