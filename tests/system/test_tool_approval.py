"""The tool-approval extension over real HTTP, against ``serve`` with its backend as a real child process: the two
draft states that need the clock or a backend that dies mid-write. An approval that nobody decides before its
plan expires ends the task ``denied-not-executed`` with nothing written; a write the backend commits and then
dies on ends ``outcome-unknown`` (the tool may have run; the backend's database shows it did), never a denial.
A cancelled write's approval shows cancelled to ``approvals list`` and takes no late Approve. The client is the
Python SDK declaring both extensions (tests/support/tasks.py); the browser-driven flows with the TypeScript and
fastmcp clients are in tests/system/interop/test_tool_approval_interop.py."""

from __future__ import annotations

import hashlib
import os
import sys
import tomllib
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from gateway.approvals.lifecycle import approval_id_for
from tests.support import tasks
from tests.support.approvals import TOKENS, approvals_section, url_mode
from tests.support.clients import error_body, error_code, new_key, preview
from tests.support.configs import config_data, write_toml
from tests.support.processes import free_port, serve
from tests.support.profiles import TENANTS
from tests.system.test_tasks import approve

pytestmark = pytest.mark.anyio
SECRET = {**os.environ, "GATEWAY_SECRET_KEY": "tool-approval-tests-secret-key-0123456789abcdef"}
DISPOSITION = "io.modelcontextprotocol/tool-approval-disposition"
AUTHORIZATION = "io.modelcontextprotocol/authorization"
BOTH = ["tenants:read", "tenants:reset"]


def gateway(tmp: Path, port: int, *backend_args: str, plan_seconds: int = 600) -> Path:
    data = config_data(
        TENANTS,
        tmp / "backend.db",
        *TENANTS.seed_demo,
        *backend_args,
        store=f"sqlite:{tmp}/gateway.db",
        state_dir=tmp / "state",
        tools=url_mode(TENANTS.write_tool, timeout=5),
    )
    data["tools"][TENANTS.preview_tool]["plan_ttl_seconds"] = plan_seconds
    data["approvals"] = approvals_section(f"http://127.0.0.1:{port}")
    return write_toml(data, tmp / "gateway.toml")


def agent(port: int) -> Client:
    return Client(f"http://127.0.0.1:{port}/mcp", extensions=[tasks.TasksClient(), tasks.ToolApprovalClient()])


async def task_of(client: Client) -> tuple[dict[str, Any], str]:
    plan = await preview(client, TENANTS)
    created = await tasks.call(client, TENANTS.write_tool, {"planId": plan["planId"], "idempotencyKey": new_key()})
    assert isinstance(created, dict) and created["status"] == "working", created
    return created, approval_id_for(plan["planId"])


async def test_an_approval_nobody_decides_in_time_ends_denied_not_executed(tmp_path: Path) -> None:
    port, db = free_port(), tmp_path / "backend.db"
    async with serve(gateway(tmp_path, port, plan_seconds=3), port, env=SECRET), agent(port) as client:
        created, _ = await task_of(client)
        before = TENANTS.write_count(db), TENANTS.snapshot(db, TENANTS.main)
        waiting = await tasks.get(client, created["taskId"], meta=True)
        ended = await tasks.resolved(client, created["taskId"], seconds=30)
    assert waiting["status"] == "working" and waiting["_meta"][AUTHORIZATION]["remediation"] == "available"
    assert ended["status"] == "completed" and ended["result"]["isError"] is True
    assert ended["result"]["_meta"][DISPOSITION] == "denied-not-executed"
    assert ended["result"]["_meta"][AUTHORIZATION]["remediation"] == "unavailable"
    assert "did not run" in ended["result"]["content"][-1]["text"]
    assert (TENANTS.write_count(db), TENANTS.snapshot(db, TENANTS.main)) == before


async def test_a_write_whose_backend_dies_after_committing_ends_outcome_unknown(tmp_path: Path) -> None:
    port, db = free_port(), tmp_path / "backend.db"
    config = gateway(tmp_path, port, "--fault", "drop-after-write:1")
    async with serve(config, port, env=SECRET), agent(port) as client:
        created, approval_id = await task_of(client)
        before = TENANTS.write_count(db)
        await approve(port, approval_id)
        ended = await tasks.resolved(client, created["taskId"], seconds=60)
    assert ended["status"] == "completed" and ended["result"]["isError"] is True
    assert ended["result"]["_meta"] == {DISPOSITION: "outcome-unknown"}  # no denial: it may have run
    assert "may have run" in ended["result"]["content"][-1]["text"]
    assert TENANTS.write_count(db) == before + 1  # it did: the backend committed before it died


async def test_a_cancelled_write_shows_cancelled_in_approvals_list_and_takes_no_late_approve(tmp_path: Path) -> None:
    port, db = free_port(), tmp_path / "backend.db"
    async with serve(gateway(tmp_path, port), port, env=SECRET), agent(port) as client:
        created, approval_id = await task_of(client)
        before = TENANTS.write_count(db), TENANTS.snapshot(db, TENANTS.main)
        await tasks.cancel(client, created["taskId"])
        env = {**os.environ, "GATEWAY_APPROVER_TOKEN": TOKENS["carol"]}
        command = [sys.executable, "-m", "gateway", "approvals", "list", "--url", f"http://127.0.0.1:{port}"]
        listed = await anyio.run_process(command, check=False, env=env)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
            late = await http.post(
                f"/approvals/api/{approval_id}",
                json={"decision": "approve"},
                headers={"Authorization": f"Bearer {TOKENS['bob']}"},
            )
        ended = await tasks.get(client, created["taskId"])
    row = next(line for line in listed.stdout.decode().splitlines() if line.startswith(approval_id))
    assert listed.returncode == 0 and row.split()[1] == "cancelled", listed.stdout
    assert late.status_code == 409 and late.json()["refused"] == "cancelled"
    assert ended["status"] == "cancelled"
    assert (TENANTS.write_count(db), TENANTS.snapshot(db, TENANTS.main)) == before


async def test_a_four_eyes_write_names_how_many_must_approve_and_that_the_caller_cannot(tmp_path: Path) -> None:
    """Over HTTP with a static token, for a client that declares neither extension (both eras): approval_pending's
    structured denial says one more person must approve, and not the caller."""
    port, db = free_port(), tmp_path / "backend.db"
    config = gateway(tmp_path, port)
    data = tomllib.loads(config.read_text())
    data["tools"][TENANTS.write_tool].update(four_eyes=True, approvers=2)
    alice = hashlib.sha256(b"alice-token-0123456789").hexdigest()
    data["auth"] = {
        "verifier": "static",
        "resource_url": f"http://127.0.0.1:{port}/mcp",
        "tokens": [{"sha256": alice, "client_id": "alice", "subject": "alice", "scopes": BOTH}],
    }
    write_toml(data, config)
    pending = []
    async with serve(config, port, env=SECRET):
        for mode in ("legacy", "auto"):
            http = httpx2.AsyncClient(headers={"Authorization": "Bearer alice-token-0123456789"}, timeout=60)
            url = f"http://127.0.0.1:{port}/mcp"
            async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:
                plan = await preview(client, TENANTS)
                args = {"planId": plan["planId"], "idempotencyKey": new_key()}
                pending.append(await client.call_tool(TENANTS.write_tool, args))
    for answer in pending:
        assert error_code(answer) == "approval_pending"
        [people] = [
            hint
            for hint in (answer.meta or {})[AUTHORIZATION]["remediationHints"]
            if hint["type"] == "mcp-safety-gateway/approval"
        ]
        assert (people["approversNeeded"], people["approvedSoFar"], people["callerMayApprove"]) == (2, 0, False)
        assert error_body(answer)["details"]["fourEyes"] is True
    assert TENANTS.write_count(db) == 0
