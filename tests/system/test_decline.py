"""A decline ends the plan: the same plan never prompts again (consent fatigue is how people end up clicking yes),
the agent must preview again, and the idempotency key stays free for the new plan. A real gateway process."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.clients import Answers, applied_body, error_code, http_client, new_key, preview
from tests.support.configs import write_config
from tests.support.processes import audit_list, free_port, serve
from tests.support.profiles import TENANTS

pytestmark = pytest.mark.anyio


async def test_a_declined_or_cancelled_prompt_uses_the_plan_up_and_leaves_the_key_free(
    tmp_path: Path, era: str
) -> None:
    config, db, port = write_config(TENANTS, tmp_path), tmp_path / "backend.db", free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    async with serve(config, port):
        for written, action in enumerate(("decline", "cancel")):
            answers = Answers(action)
            async with http_client(era, url, answers) as client:
                plan = await preview(client, TENANTS)
                key = new_key()
                refused = await client.call_tool(TENANTS.write_tool, {"planId": plan["planId"], "idempotencyKey": key})
                again = await client.call_tool(TENANTS.write_tool, {"planId": plan["planId"], "idempotencyKey": key})
                other_key = await client.call_tool(
                    TENANTS.write_tool, {"planId": plan["planId"], "idempotencyKey": new_key()}
                )
            assert error_code(refused) == "not_confirmed"
            assert error_code(again) == error_code(other_key) == "plan_not_found"
            assert len(answers.prompts) == 1  # asked once, never again about that plan
            assert TENANTS.write_count(db) == written
            async with http_client(era, url, Answers()) as client:
                fresh = await preview(client, TENANTS)
                version = TENANTS.version(db, TENANTS.main)
                applied = await client.call_tool(TENANTS.write_tool, {"planId": fresh["planId"], "idempotencyKey": key})
            assert applied.structured_content == applied_body(fresh, version + 1), applied.content
            assert TENANTS.write_count(db) == written + 1
            entries = [e for e in await audit_list(config) if e["idempotency_key"] == key]
            outcomes = [(e["outcome"], e["code"], e["confirmation"]) for e in entries]
            # plan_not_found reached no plan, so only the first of its minute is stored on its own
            # (gateway.audit.floods): the first loop's is; the second loop's may be folded into a count.
            first_refusal = [("refused", "plan_not_found", None)] if written == 0 else []
            assert [o for o in outcomes if written == 0 or o[1] != "plan_not_found"] == [
                ("refused", "not_confirmed", action),
                *first_refusal,
                ("applied", None, "accept"),
            ]
