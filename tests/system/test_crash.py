"""A gateway killed at each step of the write path, then restarted on the same store: no key ever writes twice, a
key left in flight reads as outcome_unknown instead of hanging, and plans survive. On the SQLite store (per
god-tool profile) and on PostgreSQL (where a key left in flight is fenced by its lock's lease: it reads
request_in_progress until the lease lapses, then outcome_unknown)."""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
from mcp import Client

from gateway.audit.entries import RECOVERED
from gateway.crashpoints import ALL_POINTS, ENV_VAR
from gateway.stores.leases import LEASE_MARGIN_SECONDS
from tests.support.clients import Answers, error_body, error_code, new_key, preview
from tests.support.configs import write_config
from tests.support.processes import free_port, serve
from tests.support.profiles import TENANTS, Profile

pytestmark = pytest.mark.anyio

SHORT_CALL = 1.0
SHORT_LEASE = SHORT_CALL + LEASE_MARGIN_SECONDS + 0.5
"""The shortest lock lease serve accepts over a 1 s backend call timeout: a dead process's lock lapses soon."""
TOOL = object()
"""Stands for the profile's write tool in an expected audit entry."""
RETRIED: tuple[Any, ...] = ("unknown", "outcome_unknown", TOOL, None, {})
"""The entry of a retry that heard outcome_unknown."""
WRITES_AT_CRASH = {"after-backend-write": 1, "before-settle": 1, "mid-settle": 1}


@dataclass
class Crashed:
    """What a write killed at a crash point and retried twice after a restart left."""

    args: dict[str, str]
    version: int
    writes_at_crash: int
    retry: types.CallToolResult
    again: types.CallToolResult
    answers: Answers
    entries: list[tuple[Any, ...]]
    """(outcome, code, tool, version_before, extra) of the key's audit entries, oldest first."""


async def crash_and_retry(config: Path, db: Path, profile: Profile, point: str) -> Crashed:
    """Serve, preview, die at ``point`` under the write; serve again on the same store and retry the write (past
    any request_in_progress while a dead holder's lock lapses), then once more; read the key's audit."""
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

    port = free_port()
    answers = Answers()
    async with serve(config, port), Client(f"http://127.0.0.1:{port}/mcp", elicitation_callback=answers) as client:
        with anyio.fail_after(30):
            while True:
                retry = await client.call_tool(profile.write_tool, args)
                if not retry.is_error or error_code(retry) != "request_in_progress":
                    break
                await anyio.sleep(0.2)
        again = await client.call_tool(profile.write_tool, args)
    command = [sys.executable, "-m", "gateway", "audit", "list", "--json", "--config", str(config)]
    listed = await anyio.run_process(command)
    entries = [
        (e["outcome"], e["code"], e["tool"], e["version_before"], e["extra"])
        for e in map(json.loads, listed.stdout.decode().splitlines())
        if e["idempotency_key"] == args["idempotencyKey"] and e["code"] != "request_in_progress"
    ]
    return Crashed(args, version, writes_at_crash, retry, again, answers, entries)


def assert_audited(crashed: Crashed, profile: Profile, point: str, unknown: list[tuple[Any, ...]]) -> None:
    """Before the claim: the applied entry and the replay's. After it: the entries ``unknown`` lists."""
    if point == "before-claim":
        digest = crashed.entries[0][4].get("factsDigest", "")
        assert re.fullmatch(r"[0-9a-f]{64}", digest), "a form-mode yes records the facts digest the person was shown"
        applied = ("applied", None, profile.write_tool, crashed.version, {"mode": "form", "factsDigest": digest})
        assert crashed.entries == [applied, ("replayed", None, profile.write_tool, None, {})]
    else:
        assert crashed.entries == [
            tuple(profile.write_tool if part is TOOL else part for part in entry) for entry in unknown
        ]


def assert_never_twice(crashed: Crashed, profile: Profile, db: Path, point: str) -> None:
    """Before the claim: asked again and applied once. After it: outcome_unknown on every retry, no prompt, no
    second write."""
    assert crashed.writes_at_crash == WRITES_AT_CRASH.get(point, 0)
    if point == "before-claim":
        retry = crashed.retry.structured_content
        assert retry is not None and retry["replayed"] is False
        assert crashed.again.structured_content == {**retry, "replayed": True}
        assert len(crashed.answers.prompts) == 1
        assert profile.write_count(db) == 1
    else:
        assert error_code(crashed.retry) == error_code(crashed.again) == "outcome_unknown"
        assert error_body(crashed.retry)["details"]["current"] is not None
        assert crashed.answers.prompts == []
        assert profile.write_count(db) == crashed.writes_at_crash
        assert profile.version(db, profile.main) == crashed.version + crashed.writes_at_crash


@pytest.mark.parametrize("point", ALL_POINTS)
async def test_a_crash_at_any_step_never_leads_to_a_second_write(tmp_path: Path, profile: Profile, point: str) -> None:
    config, db = write_config(profile, tmp_path), tmp_path / "backend.db"
    crashed = await crash_and_retry(config, db, profile, point)
    assert_never_twice(crashed, profile, db, point)
    # Once the killed call had claimed its key, the restart wrote an audit entry for it. The outcome's own entry is
    # stored in the settle's transaction, so a crash before its commit (before-settle, and mid-settle: the entry
    # inserted, not committed) loses the entry with the settlement, and the key never has two contradicting ones.
    # The recovered entry names the tool and the version before the write as the claim recorded them.
    recovered = ("unknown", "outcome_unknown", profile.write_tool, crashed.version, {"recovered": RECOVERED})
    assert_audited(crashed, profile, point, [recovered, RETRIED, RETRIED])


@pytest.mark.parametrize("point", ALL_POINTS)
async def test_a_crash_at_any_step_on_postgres_never_leads_to_a_second_write(
    tmp_path: Path, postgres_url: str, point: str
) -> None:
    profile, db = TENANTS, tmp_path / "backend.db"
    store = f"{postgres_url}&lock_lease={SHORT_LEASE}"
    config = write_config(profile, tmp_path, store=store, backend={"call_timeout_seconds": SHORT_CALL})
    crashed = await crash_and_retry(config, db, profile, point)
    assert_never_twice(crashed, profile, db, point)
    # Most often the restart comes before the dead process's lease lapsed, so no start-up sweep settles the key: the
    # retry reads it unknown once the lease lapsed, and each answer leaves its entry. On a slow machine the restart
    # comes after (CI met it once): the sweep settles the key, and says so in a recovered entry first. Either way
    # nothing claims the write was applied: a crash before the settle's commit (mid-settle included) lost the
    # outcome's entry with the outcome.
    recovered = ("unknown", "outcome_unknown", TOOL, crashed.version, {"recovered": RECOVERED})
    swept = crashed.entries[:1] == [("unknown", "outcome_unknown", profile.write_tool, crashed.version, recovered[4])]
    assert_audited(crashed, profile, point, [recovered, RETRIED, RETRIED] if swept else [RETRIED, RETRIED])
