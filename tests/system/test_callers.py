"""Callers are structured (issuer, client, subject), never concatenated, against real ``serve`` processes: a
client id that spells another caller's ``client/subject`` is still someone else, records an older gateway stored
under the concatenated name bind no one now, and the audit shows callers readably without mixing them up."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.support.clients import Answers, error_code, new_key, preview
from tests.support.configs import config_data, write_toml
from tests.support.processes import free_port, serve
from tests.support.profiles import TENANTS

pytestmark = pytest.mark.anyio
# Two static tokens whose callers the old "client_id/subject" naming could not tell apart.
SLASHED = {"sha256": hashlib.sha256(b"slashed").hexdigest(), "client_id": "console/alice"}
SPLIT = {"sha256": hashlib.sha256(b"split").hexdigest(), "client_id": "console", "subject": "alice"}
SCOPES = ["tenants:read", "tenants:reset"]


def config(tmp: Path, *, auth: bool, stdio_caller: str = "local") -> Path:
    data = config_data(
        TENANTS, tmp / "backend.db", *TENANTS.seed_demo, store=f"sqlite:{tmp}/gateway.db", state_dir=tmp / "state"
    )
    data["gateway"] = {**data["gateway"], "stdio_caller": stdio_caller}
    if auth:
        data["auth"] = {
            "verifier": "static",
            "resource_url": "http://127.0.0.1/mcp",
            "tokens": [{**SLASHED, "scopes": SCOPES}, {**SPLIT, "scopes": SCOPES}],
        }
    return write_toml(data, tmp / ("auth.toml" if auth else "local.toml"))


@asynccontextmanager
async def served(path: Path) -> AsyncIterator[str]:
    port = free_port()
    async with serve(path, port):
        yield f"http://127.0.0.1:{port}/mcp"


def client(url: str, bearer: str | None, era: str, answers: Answers | None = None) -> Client:
    headers = {"Authorization": f"Bearer {bearer}"} if bearer is not None else {}
    http = httpx2.AsyncClient(headers=headers, timeout=60)
    mode = "legacy" if era == "2025-11-25" else "auto"
    return Client(streamable_http_client(url, http_client=http), mode=mode, elicitation_callback=answers)


def audit_list(path: Path, *words: str) -> subprocess.CompletedProcess[str]:
    args = [sys.executable, "-m", "gateway", "audit", "list", "--config", str(path), *words]
    return subprocess.run(args, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
async def test_a_client_id_with_a_slash_is_not_the_client_with_that_subject(tmp_path: Path, era: str) -> None:
    db = tmp_path / "backend.db"
    key = new_key()
    async with (
        served(config(tmp_path, auth=True)) as url,
        client(url, "slashed", era, Answers()) as slashed,
        client(url, "split", era, Answers()) as split,
    ):
        plan = await preview(slashed, TENANTS)
        before = TENANTS.write_count(db)
        stolen = await split.call_tool("reset_tenant", {"planId": plan["planId"], "idempotencyKey": new_key()})
        done = await slashed.call_tool("reset_tenant", {"planId": plan["planId"], "idempotencyKey": key})
        replayed = await split.call_tool("reset_tenant", {"planId": plan["planId"], "idempotencyKey": key})
    assert error_code(stolen) == "plan_not_found"
    assert done.structured_content is not None and done.structured_content["replayed"] is False
    assert error_code(replayed) == "plan_not_found"  # the other caller never sees this key's result
    assert TENANTS.write_count(db) == before + 1
    listed = audit_list(tmp_path / "auth.toml", "--json")
    callers = {json.loads(line)["caller"] for line in listed.stdout.splitlines()}
    assert len(callers) == 2  # two callers in the audit, not one
    table = audit_list(tmp_path / "auth.toml")
    rows = table.stdout.splitlines()[1:]
    assert {" ".join(row.split()[2:6]) for row in rows} == {
        "console%2Falice (static token) reset_tenant",
        "console/alice (static token) reset_tenant",
    }
    only = audit_list(tmp_path / "auth.toml", "--caller", "console/alice (static token)", "--json")
    entries = [json.loads(line) for line in only.stdout.splitlines()]
    assert [(entry["outcome"], entry["code"]) for entry in entries] == [("refused", "plan_not_found")] * 2


async def test_records_stored_under_the_old_concatenated_name_bind_no_one(tmp_path: Path) -> None:
    """An older gateway named the caller ``client_id/subject``; its plans and keys must not be spent by a token
    that now reads as a structured caller (a second write), nor by anyone else: they lapse with their TTLs."""
    db = tmp_path / "backend.db"
    key = new_key()
    older = config(tmp_path, auth=False, stdio_caller="console/alice")
    async with served(older) as url, client(url, None, "2025-11-25", Answers()) as old:
        applied = await preview(old, TENANTS)
        await old.call_tool("reset_tenant", {"planId": applied["planId"], "idempotencyKey": key})
        pending = await preview(old, TENANTS, target=TENANTS.other)
    before = TENANTS.write_count(db), TENANTS.snapshot(db, TENANTS.other)
    async with served(config(tmp_path, auth=True)) as url, client(url, "split", "2025-11-25", Answers()) as now:
        retried = await now.call_tool("reset_tenant", {"planId": applied["planId"], "idempotencyKey": key})
        spent = await now.call_tool("reset_tenant", {"planId": pending["planId"], "idempotencyKey": new_key()})
    assert error_code(retried) == "plan_not_found"
    assert error_code(spent) == "plan_not_found"
    assert (TENANTS.write_count(db), TENANTS.snapshot(db, TENANTS.other)) == before
