"""The approval rules speak SQL: they read the statement's class, the tables it writes and the rows its measure
counted (``statement``, ``summary``). A class that rewrites a table (DDL, TRUNCATE) needs four eyes on the approval
page by default, and the page shows the person the normalised statement, escaped, under the gateway's words.

Against a real SQLite file behind an in-process server that answers as dbhub does (tests/support/sql_double.py)."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import mcp_types as types
import pytest
from mcp import Client

from gateway.approvals.lifecycle import approval_id_for
from gateway.http.app import build_app
from gateway.mcp import resume as gateway_tasks
from gateway.mcp.server import build_server
from gateway.records import Plan
from gateway.runtime import Gateway
from tests.support import tasks
from tests.support.approvals import TOKENS, PageUser, approvals_section
from tests.support.clients import ERAS, Answers, connect, error_body, error_code, new_key
from tests.support.sql_double import Switches, config_data, sql_gateway
from tests.support.sql_servers import SEEDED, counts

pytestmark = pytest.mark.anyio

PAGE = "https://127.0.0.1:8443"
RULES = [
    {"name": "no-audit-writes", "when": 'statement.written.exists(t, t.startsWith("audit_"))', "mode": "deny"},
    {"name": "big-delete", "when": 'statement.class == "delete" && summary.rows > 2', "mode": "url", "approvers": 2},
    {"name": "schema", "when": 'statement.class == "ddl"', "mode": "url", "approvers": 3},
]


def data(tmp: Path, **execute: Any) -> dict[str, Any]:
    """The double's config with the rules above, an approval page for bob and carol, and static caller tokens (so
    that four eyes can tell a caller from an approver)."""
    execute = {"approval": RULES, "classes": ["insert", "update", "delete", "ddl"], **execute}
    made = config_data(tmp / "state", **execute)
    made["approvals"] = approvals_section(PAGE)
    made["http"] = {"allowed_origins": [PAGE]}
    token = {"sha256": hashlib.sha256(b"agent-token").hexdigest(), "client_id": "agent", "scopes": []}
    made["auth"] = {"verifier": "static", "resource_url": "https://gw.example.com/mcp", "tokens": [token]}
    return made


@pytest.fixture
async def gw(tmp_path: Path, database: Path, switches: Switches) -> AsyncIterator[Gateway]:
    async with sql_gateway(data(tmp_path), database, switches) as running:
        yield running


async def stored_choice(gw: Gateway, plan_id: str) -> dict[str, Any]:
    """How the stored plan must be confirmed."""
    plan = await gw.store.get_plan(plan_id, gw.clock())
    assert isinstance(plan, Plan) and plan.approval is not None
    return plan.approval


async def preview(gw: Gateway, era: str, sql: str) -> Any:
    async with connect(gw, era) as client:
        return await client.call_tool("preview_statement", {"sql": sql})


@pytest.mark.parametrize("era", ERAS)
async def test_the_rules_pick_a_mode_by_the_statements_class_tables_and_rows(gw: Gateway, era: str) -> None:
    small = (await preview(gw, era, "DELETE FROM rows WHERE payload = 'a1'")).structured_content
    big = (await preview(gw, era, "DELETE FROM rows WHERE tenant_id = 'tn_a'")).structured_content
    update = (await preview(gw, era, "UPDATE rows SET payload = 'x' WHERE tenant_id = 'tn_a'")).structured_content
    assert small["approval"] == {"mode": "form"}
    assert big["approval"] == {"mode": "url", "rule": "big-delete"}
    assert update["approval"] == {"mode": "form"}  # five rows, but not a delete
    assert (await stored_choice(gw, big["planId"]))["approvers"] == 2


@pytest.mark.parametrize("era", ERAS)
async def test_a_write_to_an_audit_table_is_denied_and_nothing_is_written(
    gw: Gateway, database: Path, switches: Switches, era: str
) -> None:
    result = await preview(gw, era, "INSERT INTO audit_log (tenant_id, action) VALUES ('tn_a', 'forged')")
    assert error_code(result) == "denied"
    assert error_body(result)["details"] == {"rule": "no-audit-writes"}
    assert switches.writes() == [] and counts(database) == SEEDED
    denied = [entry async for entry in gw.store.audit_entries() if entry.outcome == "denied"]
    assert [(entry.target, entry.extra["rule"]) for entry in denied] == [("audit_log", "no-audit-writes")]


@pytest.mark.parametrize("era", ERAS)
async def test_ddl_needs_four_eyes_on_the_page_whatever_the_rules_ask_and_more_when_they_ask_more(
    tmp_path: Path, database: Path, switches: Switches, era: str
) -> None:
    lenient = [{"name": "small-ddl", "when": "summary.rows < 100", "mode": "form"}]
    async with sql_gateway(data(tmp_path, approval=lenient), database, switches) as gw:
        plan = (await preview(gw, era, "ALTER TABLE rows ADD COLUMN note TEXT")).structured_content
        stored = await stored_choice(gw, plan["planId"])
    assert plan["approval"] == {"mode": "url", "rule": "four_eyes_classes"} and stored["four_eyes"] is True
    async with sql_gateway(data(tmp_path), database, switches) as gw:
        plan = (await preview(gw, era, 'DROP TABLE "Tenant Notes"')).structured_content
        stored = await stored_choice(gw, plan["planId"])
    assert plan["approval"] == {"mode": "url", "rule": "schema"} and plan["rows"] == 1
    assert (stored["approvers"], stored["four_eyes"]) == (3, True)


async def test_the_approval_page_shows_the_normalised_statement_escaped_under_the_gateways_words(
    gw: Gateway, database: Path, switches: Switches
) -> None:
    async with connect(gw, "2026-07-28") as client:
        plan = (
            await client.call_tool(
                "preview_statement", {"sql": "delete   from rows where payload <> '<b>x</b>' and tenant_id = 'tn_a'"}
            )
        ).structured_content
        args = {"planId": plan["planId"], "idempotencyKey": new_key()}
        assert error_code(await client.call_tool("execute_statement", args)) == "approval_pending"
    statement = "DELETE FROM rows WHERE payload <> '<b>x</b>' AND tenant_id = 'tn_a'"
    assert plan["statement"] == statement
    app = build_app(gw)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=PAGE) as http:
        user = PageUser(http, PAGE)
        assert (await user.sign_in("bob")).status_code == 303
        page = (await http.get(f"/approvals/{approval_id_for(plan['planId'])}")).text
    shown = statement.replace("<", "&lt;").replace(">", "&gt;").replace("'", "&#39;")
    assert f'<pre class="statement">{shown}</pre>' in page
    assert "Delete 5 rows from rows?" in page
    assert "<b>x</b>" not in page
    assert switches.writes() == [] and counts(database) == SEEDED
    assert TOKENS["bob"] not in page


@pytest.mark.parametrize("era", ERAS)
async def test_a_typed_confirmation_asks_for_the_table_the_statement_writes(
    tmp_path: Path, database: Path, switches: Switches, era: str
) -> None:
    async with sql_gateway(data(tmp_path, confirm="typed", approval=[]), database, switches) as gw:
        plan = (await preview(gw, era, "DELETE FROM rows WHERE tenant_id = 'tn_b'")).structured_content
        answers = Answers("accept", {"confirmTarget": "rows"})
        async with connect(gw, era, answers) as client:
            done = await client.call_tool("execute_statement", {"planId": plan["planId"], "idempotencyKey": new_key()})
    assert not done.is_error, done.content
    prompt = answers.prompts[0]
    assert isinstance(prompt, types.ElicitRequestFormParams)
    assert prompt.requested_schema["properties"]["confirmTarget"]["title"] == "Type rows to confirm"
    assert counts(database) == {**SEEDED, "rows": 5}


@pytest.mark.parametrize("era", ERAS)
async def test_a_big_delete_runs_once_two_people_approved_it_on_the_page(
    gw: Gateway, database: Path, switches: Switches, era: str
) -> None:
    plan = (await preview(gw, era, "DELETE FROM rows WHERE tenant_id = 'tn_a'")).structured_content
    args = {"planId": plan["planId"], "idempotencyKey": new_key()}
    async with connect(gw, era) as client:
        assert error_code(await client.call_tool("execute_statement", args)) == "approval_pending"
    app = build_app(gw)
    for person in ("bob", "carol"):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=PAGE) as http:
            user = PageUser(http, PAGE)
            assert (await user.sign_in(person)).status_code == 303
            assert (await user.decide(approval_id_for(plan["planId"]), "approve")).status_code == 303
    async with connect(gw, era) as client:
        done = await client.call_tool("execute_statement", args)
        again = await client.call_tool("execute_statement", args)
    assert not done.is_error, done.content
    assert (done.structured_content["rowsReported"], again.structured_content["replayed"]) == (5, True)
    assert switches.writes() == [plan["statement"]] and counts(database) == {**SEEDED, "rows": 3}
    applied = [entry async for entry in gw.store.audit_entries() if entry.outcome == "applied"]
    assert [len(entry.extra["approvers"]) for entry in applied] == [2]
    assert applied[0].extra["statement"] == plan["statement"] and applied[0].extra["rule"] == "big-delete"


async def test_a_big_delete_followed_as_a_task_runs_once_after_people_approve_it(
    gw: Gateway, database: Path, switches: Switches
) -> None:
    """The tasks extension (2026-07-28): the url-mode statement is answered with a task, and the gateway runs it
    itself once the approval is decided."""
    async with Client(build_server(gw), extensions=[tasks.TasksClient()]) as client:
        plan = await client.call_tool("preview_statement", {"sql": "DELETE FROM rows WHERE tenant_id = 'tn_a'"})
        args = {"planId": plan.structured_content["planId"], "idempotencyKey": new_key()}
        created = await tasks.call(client, "execute_statement", args)
        assert isinstance(created, dict) and created["resultType"] == "task"
        await gateway_tasks.resume_due(gw)
        assert switches.writes() == []
        app = build_app(gw)
        for person in ("bob", "carol"):
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=PAGE) as http:
                user = PageUser(http, PAGE)
                assert (await user.sign_in(person)).status_code == 303
                await user.decide(approval_id_for(args["planId"]), "approve")
        await gateway_tasks.resume_due(gw)
        done = await tasks.get(client, created["taskId"])
    assert done["status"] == "completed"
    assert done["result"]["structuredContent"]["rowsReported"] == 5
    assert switches.writes() == [plan.structured_content["statement"]] and counts(database) == {**SEEDED, "rows": 3}


@pytest.mark.parametrize("era", ERAS)
async def test_a_rows_budget_counts_each_plans_rows_from_its_issue_and_never_a_writes_own(
    tmp_path: Path, database: Path, switches: Switches, era: str
) -> None:
    """The attack: an agent splits a large delete into previews that each stay under a per-statement limit. The
    ``rows`` budget counts the rows of every plan from its issue, so the plan that would pass the hour's budget is
    denied at preview, nothing runs; a write already planned within the budget still runs (it never counts its
    own rows against itself)."""
    budget = {"name": "rows-per-hour", "when": "rows.caller.hour + statement.rows > 6", "mode": "deny"}
    async with sql_gateway(data(tmp_path, approval=[budget]), database, switches) as gw:
        five = (await preview(gw, era, "DELETE FROM rows WHERE tenant_id = 'tn_a'")).structured_content
        one = (await preview(gw, era, "DELETE FROM rows WHERE payload = 'b1'")).structured_content
        refused = await preview(gw, era, "DELETE FROM rows WHERE payload = 'b3'")
        assert five["approval"] == one["approval"] == {"mode": "form"}
        assert error_code(refused) == "denied" and error_body(refused)["details"] == {"rule": "rows-per-hour"}
        assert switches.writes() == [] and counts(database) == SEEDED

        async with connect(gw, era, Answers("accept")) as client:
            done = await client.call_tool("execute_statement", {"planId": five["planId"], "idempotencyKey": new_key()})
        assert not done.is_error, done.content
        assert counts(database)["rows"] == SEEDED["rows"] - 5
