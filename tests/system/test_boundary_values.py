"""Values at the backend boundary: ids as the backend spells them, patterns that match whole values, lookup numbers
read fresh and checked again before the write, and results that fit the tool's own schema. A real gateway
process over a real legacy backend; each test checks the backend's write_log and the audit."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest

from tests.support.clients import ERAS, Answers, applied_body, error_code, http_client, new_key, preview
from tests.support.configs import write_config
from tests.support.processes import audit_list, free_port, serve
from tests.support.profiles import TENANTS

pytestmark = pytest.mark.anyio

DB = "backend.db"


def protect_prod_by_glob(tools: dict[str, Any]) -> None:
    tools[TENANTS.preview_tool]["target"]["protected_ids"] = ["tn_prod_*"]


def write_log(db: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(db) as conn:
        return [(row[0], row[1]) for row in conn.execute("SELECT action, tenant_id FROM write_log ORDER BY id")]


def set_fixture_rows(db: Path, fixture: str, rows: int) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE fixtures SET row_count = ? WHERE name = ?", (rows, fixture))


async def test_an_id_spelled_another_way_is_protected_planned_and_audited_as_the_backend_spells_it(
    tmp_path: Path,
) -> None:
    """The backend matches ids whatever their case; protection by id glob must still hold, and the plan, the
    lock, the write and the audit all name the tenant by its own id."""
    config = write_config(TENANTS, tmp_path, "--seed-demo", "--ids-ignore-case", tools=protect_prod_by_glob)
    db, port = tmp_path / DB, free_port()
    async with serve(config, port), http_client("2026-07-28", f"http://127.0.0.1:{port}/mcp", Answers()) as client:
        await preview(client, TENANTS)  # the backend has started and seeded its file
        TENANTS.set_protected(db, TENANTS.protected, False)  # only the glob protects it now
        refused = [
            await client.call_tool(TENANTS.preview_tool, {"tenantId": spelling, "fixture": "empty"})
            for spelling in ("tn_prod_eu", "Tn_Prod_Eu", "TN_PROD_EU")
        ]
        plan = await preview(client, TENANTS, target="TN_Checkout01")
        version = TENANTS.version(db, TENANTS.main)
        args = {"planId": plan["planId"], "idempotencyKey": new_key()}
        applied = await client.call_tool(TENANTS.write_tool, args)
    assert [error_code(result) for result in refused] == ["tenant_protected"] * 3
    assert plan[TENANTS.target_arg] == TENANTS.main
    assert applied.structured_content == applied_body(plan, version + 1), applied.content
    assert write_log(db) == [("reseed", TENANTS.main)]
    entries = [e for e in await audit_list(config) if e["idempotency_key"] == args["idempotencyKey"]]
    assert [(e["outcome"], e["target"]) for e in entries] == [("applied", TENANTS.main)]


async def test_an_id_with_a_trailing_newline_does_not_match_an_anchored_pattern(tmp_path: Path) -> None:
    config, port = write_config(TENANTS, tmp_path), free_port()
    async with serve(config, port), http_client("2026-07-28", f"http://127.0.0.1:{port}/mcp") as client:
        refused = await client.call_tool(TENANTS.preview_tool, {"tenantId": "tn_load04\n", "fixture": "empty"})
        accepted = await client.call_tool(TENANTS.preview_tool, {"tenantId": "tn_load04", "fixture": "empty"})
        published = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert error_code(refused) == "invalid_arguments"
    assert not accepted.is_error
    pattern = published[TENANTS.preview_tool].input_schema["properties"]["tenantId"]["pattern"]
    assert pattern.startswith("^") and pattern.endswith("$")  # ECMA-262 reads it as a whole-value match too
    assert TENANTS.write_count(tmp_path / DB) == 0


class ChangesFixtureWhileAsking(Answers):
    """A user who says yes, while someone changes the fixture's size in the backend during the prompt."""

    def __init__(self, db: Path, fixture: str, rows: int) -> None:
        super().__init__()
        self.db, self.fixture, self.rows = db, fixture, rows

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        set_fixture_rows(self.db, self.fixture, self.rows)
        return await super().__call__(context, params)


@pytest.mark.parametrize("era", ERAS)
async def test_lookup_numbers_are_read_for_each_preview_and_checked_again_before_the_write(
    tmp_path: Path, era: str
) -> None:
    config, db, port = write_config(TENANTS, tmp_path), tmp_path / DB, free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    async with serve(config, port):
        async with http_client(era, url, Answers()) as client:
            told = await preview(client, TENANTS, variant=1)  # "smoke": 25 rows
            set_fixture_rows(db, "smoke", 5000)
            before_prompt = await client.call_tool(
                TENANTS.write_tool, {"planId": told["planId"], "idempotencyKey": new_key()}
            )
            fresh = await preview(client, TENANTS, variant=1)
        asking = ChangesFixtureWhileAsking(db, "smoke", 50)
        async with http_client(era, url, asking) as client:
            key = new_key()
            during_prompt = await client.call_tool(
                TENANTS.write_tool, {"planId": fresh["planId"], "idempotencyKey": key}
            )
    assert told["rowsInserted"] == 25
    assert error_code(before_prompt) == "plan_stale"
    assert fresh["rowsInserted"] == 5000
    assert len(asking.prompts) == 1 and "(5000 rows)" in asking.prompts[0].message
    assert error_code(during_prompt) == "plan_stale"
    assert TENANTS.write_count(db) == 0
    entries = [e for e in await audit_list(config) if e["idempotency_key"] == key]
    assert [(e["outcome"], e["code"]) for e in entries] == [("refused", "plan_stale")]


@pytest.mark.parametrize("era", ERAS)
async def test_a_committed_write_answered_with_a_version_of_the_wrong_type_reports_the_version_read_back(
    tmp_path: Path, era: str
) -> None:
    config = write_config(TENANTS, tmp_path, "--seed-demo", "--fault", "string-version-after-write")
    db, port = tmp_path / DB, free_port()
    async with serve(config, port), http_client(era, f"http://127.0.0.1:{port}/mcp", Answers()) as client:
        plan = await preview(client, TENANTS)
        version = TENANTS.version(db, TENANTS.main)
        args = {"planId": plan["planId"], "idempotencyKey": new_key()}
        first = await client.call_tool(TENANTS.write_tool, args)  # the client checks it against the outputSchema
        retry = await client.call_tool(TENANTS.write_tool, args)
    assert first.structured_content == applied_body(plan, version + 1)
    assert retry.structured_content == applied_body(plan, version + 1, replayed=True)
    assert TENANTS.write_count(db) == 1
    entries = [e for e in await audit_list(config) if e["idempotency_key"] == args["idempotencyKey"]]
    assert [(e["outcome"], e["version_after"]) for e in entries] == [
        ("applied", version + 1),
        ("replayed", version + 1),
    ]
