"""Tasks over real HTTP: a real ``serve`` on a SQLite store (and two replicas on Redis), a real backend process,
SDK clients declaring the tasks extension as the agents, the approvers' JSON API as the person (the browser's
side of approving is tests/system/test_approval_page.py's). A task is bound to its caller, survives a restart of
the gateway mid-wait, and any replica answers it and writes it once."""

from __future__ import annotations

import hashlib
import os
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from gateway.approvals.lifecycle import approval_id_for
from tests.support import tasks
from tests.support.approvals import TOKENS, approvals_section, url_mode
from tests.support.clients import new_key, preview
from tests.support.configs import config_data, write_toml
from tests.support.processes import free_port, http_backend, serve
from tests.support.profiles import TENANTS

pytestmark = pytest.mark.anyio
SCOPES = ["tenants:read", "tenants:reset"]
CALLERS = {name: {"sha256": hashlib.sha256(name.encode()).hexdigest(), "client_id": name} for name in ("alice", "eve")}
SECRET = {**os.environ, "GATEWAY_SECRET_KEY": "tasks-tests-shared-secret-key-0123456789abcdef"}


def config(tmp: Path, store: str, port: int, name: str = "gateway.toml", backend: dict[str, Any] | None = None) -> Path:
    data = config_data(
        TENANTS,
        tmp / "backend.db",
        *TENANTS.seed_demo,
        store=store,
        state_dir=tmp / "state",
        tools=url_mode("reset_tenant", timeout=5),
        backend=backend,
    )
    data["auth"] = {
        "verifier": "static",
        "resource_url": "http://127.0.0.1/mcp",
        "tokens": [{**token, "scopes": SCOPES} for token in CALLERS.values()],
    }
    data["approvals"] = approvals_section(f"http://127.0.0.1:{port}")
    return write_toml(data, tmp / name)


def agent(port: int, caller: str) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {caller}"}, timeout=60)
    return Client(
        streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http), extensions=[tasks.TasksClient()]
    )


async def approve(port: int, approval_id: str) -> None:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
        answer = await http.post(
            f"/approvals/api/{approval_id}",
            json={"decision": "approve"},
            headers={"Authorization": f"Bearer {TOKENS['bob']}"},
        )
    assert answer.status_code == 200, answer.text


@asynccontextmanager
async def gateway(path: Path, port: int) -> AsyncIterator[None]:
    async with serve(path, port, env=SECRET):
        yield


async def test_a_task_survives_a_restart_mid_wait_and_is_its_callers_alone(tmp_path: Path) -> None:
    port = free_port()
    path = config(tmp_path, f"sqlite:{tmp_path}/gateway.db", port)
    db = tmp_path / "backend.db"
    async with gateway(path, port), agent(port, "alice") as alice, agent(port, "eve") as eve:
        plan = await preview(alice, TENANTS)
        args = {"planId": plan["planId"], "idempotencyKey": new_key()}
        created = await tasks.call(alice, "reset_tenant", args)
        assert isinstance(created, dict) and created["resultType"] == "task"
        before = TENANTS.write_count(db), TENANTS.snapshot(db, TENANTS.main)
        with pytest.raises(MCPError) as stranger:
            await tasks.get(eve, created["taskId"])
        with pytest.raises(MCPError) as stranger_cancel:
            await tasks.cancel(eve, created["taskId"])
    # The gateway stops while the task waits; a new process on the same store takes it over.
    async with gateway(path, port), agent(port, "alice") as alice:
        assert (await tasks.get(alice, created["taskId"]))["status"] == "input_required"
        await approve(port, approval_id_for(plan["planId"]))
        done = await tasks.resolved(alice, created["taskId"])
        again = await tasks.call(alice, "reset_tenant", args)
    assert stranger.value.code == stranger_cancel.value.code == types.INVALID_PARAMS
    assert before[0] == 0 and TENANTS.write_count(db) == 1
    assert done["status"] == "completed" and done["result"]["structuredContent"]["replayed"] is False
    assert isinstance(again, types.CallToolResult) and again.structured_content is not None
    assert again.structured_content["replayed"] is True


async def test_two_replicas_on_redis_answer_one_task_and_write_once(tmp_path: Path, redis_server: str) -> None:
    ports = [free_port(), free_port()]
    paths = [config(tmp_path, redis_server, port, f"gateway{n}.toml") for n, port in enumerate(ports)]
    db = tmp_path / "backend.db"
    async with (
        gateway(paths[0], ports[0]),
        gateway(paths[1], ports[1]),
        agent(ports[0], "alice") as first,
        agent(ports[1], "alice") as second,
    ):
        plan = await preview(first, TENANTS)
        created = await tasks.call(first, "reset_tenant", {"planId": plan["planId"], "idempotencyKey": new_key()})
        assert isinstance(created, dict)
        seen = await tasks.get(second, created["taskId"])  # the other replica finds it
        await approve(ports[1], approval_id_for(plan["planId"]))
        done = await tasks.resolved(second, created["taskId"])
        on_first = await tasks.get(first, created["taskId"])
    assert seen["status"] == "input_required" and on_first == done
    assert done["status"] == "completed" and not done["result"].get("isError")
    assert TENANTS.write_count(db) == 1


async def test_a_task_approved_while_its_backend_is_down_writes_once_the_backend_is_back(tmp_path: Path) -> None:
    port, backend_port = free_port(), free_port()
    backend = {"transport": "http", "url": f"http://127.0.0.1:{backend_port}/mcp", "call_timeout_seconds": 5}
    path = config(tmp_path, f"sqlite:{tmp_path}/gateway.db", port, backend=backend)
    db = tmp_path / "backend.db"
    async with AsyncExitStack() as gateway_stack:
        async with http_backend(TENANTS, db, backend_port, *TENANTS.seed_demo):
            await gateway_stack.enter_async_context(gateway(path, port))
            alice = await gateway_stack.enter_async_context(agent(port, "alice"))
            plan = await preview(alice, TENANTS)
            created = await tasks.call(alice, "reset_tenant", {"planId": plan["planId"], "idempotencyKey": new_key()})
            assert isinstance(created, dict)
        await approve(port, approval_id_for(plan["planId"]))  # the backend is gone
        waiting = await tasks.seen(
            alice, created["taskId"], lambda t: "backend_unavailable" in t.get("statusMessage", "")
        )
        async with http_backend(TENANTS, db, backend_port):  # back, on the same database
            done = await tasks.resolved(alice, created["taskId"])
    assert waiting["status"] == "working"
    assert done["status"] == "completed" and not done["result"].get("isError"), done
    assert TENANTS.write_count(db) == 1
