"""A gateway killed at each step of the write path, then restarted on the same SQLite store: no key ever
writes twice, a key left in flight reads as outcome_unknown instead of hanging, and plans survive."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from gateway.crashpoints import ENV_VAR, SQLITE_POINTS
from tests.support.clients import Answers, error_body, error_code, new_key, preview
from tests.support.configs import write_config
from tests.support.processes import free_port, serve
from tests.support.profiles import Profile

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("point", SQLITE_POINTS)
async def test_a_crash_at_any_step_never_leads_to_a_second_write(tmp_path: Path, profile: Profile, point: str) -> None:
    config, db = write_config(profile, tmp_path), tmp_path / "backend.db"
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    async with serve(config, port, env={**os.environ, ENV_VAR: point}) as child:
        async with Client(url, elicitation_callback=Answers()) as client:
            args = {"planId": (await preview(client, profile))["planId"], "idempotencyKey": new_key()}
            version = profile.version(db, profile.main)
        with anyio.fail_after(30):
            try:
                async with Client(url, elicitation_callback=Answers()) as client:
                    await client.call_tool(profile.write_tool, args)
            except Exception:  # the gateway died under this call; its exit code is checked next
                pass
            await anyio.to_thread.run_sync(child.wait)
        assert child.returncode == 137
    writes_at_crash = profile.write_count(db)
    assert writes_at_crash == (1 if point in ("after-backend-write", "before-settle", "mid-settle") else 0)

    port = free_port()
    answers = Answers()
    async with serve(config, port), Client(f"http://127.0.0.1:{port}/mcp", elicitation_callback=answers) as client:
        retry = await client.call_tool(profile.write_tool, args)
        again = await client.call_tool(profile.write_tool, args)
    if point == "before-claim":
        # Nothing was claimed: the plan survived the restart, the user is asked again, and it applies once.
        assert retry.structured_content is not None and retry.structured_content["replayed"] is False
        assert again.structured_content == {**retry.structured_content, "replayed": True}
        assert len(answers.prompts) == 1
        assert profile.write_count(db) == 1
    else:
        assert error_code(retry) == error_code(again) == "outcome_unknown"
        current = error_body(retry)["details"]["current"]
        assert current is not None
        assert answers.prompts == []
        assert profile.write_count(db) == writes_at_crash
        assert profile.version(db, profile.main) == version + writes_at_crash
    # Once the killed call had claimed its key, the restart wrote an audit entry for it. The outcome's own entry is
    # stored in the settle's transaction, so a crash before its commit (before-settle, and mid-settle: the entry
    # inserted, not committed) loses the entry with the settlement, and the key never has two contradicting ones.
    command = [sys.executable, "-m", "gateway", "audit", "list", "--json", "--config", str(config)]
    listed = await anyio.run_process(command)
    entries = [json.loads(line) for line in listed.stdout.decode().splitlines()]
    mine = [
        (e["outcome"], e["code"], e["tool"], e["version_before"], e["extra"])
        for e in entries
        if e["idempotency_key"] == args["idempotencyKey"]
    ]
    applied: tuple[Any, ...] = ("applied", None, profile.write_tool, version, {"mode": "form"})
    if point == "before-claim":
        assert mine == [applied, ("replayed", None, profile.write_tool, None, {})]
    else:
        # The recovered entry names the tool and the version before the write as the claim recorded them.
        recovered = (
            "unknown",
            "outcome_unknown",
            profile.write_tool,
            version,
            {"recovered": "in flight when the gateway stopped"},
        )
        retries: list[tuple[Any, ...]] = [("unknown", "outcome_unknown", profile.write_tool, None, {})] * 2
        assert mine == [recovered, *retries]
