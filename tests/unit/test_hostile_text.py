"""A hostile backend names things to make a person read something else: every such name is refused where it
enters or shown escaped, in the form prompt and on the approval page alike."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.approvals.lifecycle import approval_id_for
from gateway.config import parse_config
from gateway.http.app import build_app
from legacy_backend.store import Store
from tests.support.approvals import PageUser, approvals_section
from tests.support.clients import Answers, connect, error_code, new_key, preview, running_gateway
from tests.support.configs import config_data
from tests.support.profiles import TENANTS

pytestmark = pytest.mark.anyio
PAGE = "https://127.0.0.1:8443"
REPAINT = "\r\x1b[2KDelete 0 rows in tn_sandbox99 \u202eraw <script>alert(1)</script>\n"
INVISIBLE = ("\r", "\x1b", "\u202e", "\n")


def hostile_backend(db: Path) -> None:
    """The demo data, plus a fixture and a tenant name written to repaint a terminal or turn a dialog around."""
    store = Store(db)
    store.seed(demo=True, bulk_tenants=0)
    store.close()
    with sqlite3.connect(db) as conn:
        conn.execute("INSERT INTO fixtures (name, row_count) VALUES (?, 0)", (REPAINT,))
        conn.execute("UPDATE tenants SET name = ? WHERE id = ?", (REPAINT, TENANTS.main))


def naming_tools(mode: str) -> Any:
    """The preview also reports the tenant's name, and the question quotes it."""

    def change(tools: dict[str, Any]) -> None:
        preview = tools[TENANTS.preview_tool]
        preview["summary"]["tenantName"] = {"target": "name", "schema": {"type": "string", "maxLength": 512}}
        preview["message"] = "Reset {tenantName} ({target_id}) to fixture {fixture}?"
        tools[TENANTS.write_tool]["confirm"] = mode
        tools[TENANTS.write_tool]["prompt_timeout_seconds"] = 2

    return change


async def test_a_fixture_named_to_repaint_the_terminal_is_never_offered(tmp_path: Path) -> None:
    db = tmp_path / "backend.db"
    hostile_backend(db)
    config = parse_config(config_data(TENANTS, db, state_dir=tmp_path / "state"))
    async with running_gateway(config, backend_in_process=True) as gw, connect(gw, "2025-11-25", Answers()) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        offered = tools[TENANTS.preview_tool].input_schema["properties"]["fixture"]["enum"]
        chosen = await client.call_tool(TENANTS.preview_tool, {"tenantId": TENANTS.main, "fixture": REPAINT})
    assert REPAINT not in offered and "smoke" in offered
    assert error_code(chosen) == "invalid_arguments"
    assert TENANTS.write_count(db) == 0


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
async def test_a_tenant_name_reaches_the_prompt_only_escaped(tmp_path: Path, era: str) -> None:
    db = tmp_path / "backend.db"
    hostile_backend(db)
    config = parse_config(config_data(TENANTS, db, state_dir=tmp_path / "state", tools=naming_tools("form")))
    answers = Answers(action="decline")
    async with running_gateway(config, backend_in_process=True) as gw, connect(gw, era, answers) as client:
        plan = await preview(client, TENANTS)
        refused = await client.call_tool(TENANTS.write_tool, {"planId": plan["planId"], "idempotencyKey": new_key()})
    assert error_code(refused) == "not_confirmed"
    (message,) = answers.messages
    assert not any(char in message for char in INVISIBLE), repr(message)
    assert "\\u000d\\u001b[2KDelete 0 rows in tn_sandbox99 \\u202eraw" in message
    assert TENANTS.write_count(db) == 0


async def test_the_approval_page_shows_backend_values_quoted_escaped_and_inert(tmp_path: Path) -> None:
    db = tmp_path / "backend.db"
    hostile_backend(db)
    data = config_data(TENANTS, db, state_dir=tmp_path / "state", tools=naming_tools("url"))
    data["approvals"] = approvals_section(PAGE)
    data["http"] = {"allowed_origins": [PAGE]}
    async with running_gateway(parse_config(data), backend_in_process=True) as gw:
        async with connect(gw, "2025-11-25") as client:
            plan = await preview(client, TENANTS)
            await client.call_tool(TENANTS.write_tool, {"planId": plan["planId"], "idempotencyKey": new_key()})
        app = build_app(gw)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=PAGE) as http:
            user = PageUser(http, PAGE)
            await user.sign_in("bob")
            page = (await http.get(f"/approvals/{approval_id_for(plan['planId'])}")).text
            listing = (await http.get("/approvals")).text
    for html in (page, listing):
        assert not any(char in html for char in INVISIBLE[1:3]), "a raw escape or bidi character reached the page"
        assert "<script>" not in html
    assert "\\u001b[2KDelete 0 rows in tn_sandbox99 \\u202eraw &lt;script&gt;" in page
    assert "&#34;\\u000d\\u001b" in page or "&quot;\\u000d\\u001b" in page  # visibly quoted
    assert TENANTS.write_count(db) == 0
