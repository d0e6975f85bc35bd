"""A task resumed later is authorized as if its caller called now: real ``serve`` processes on a SQLite store, a real
backend process, SDK clients declaring the tasks extension over HTTP, approvers through the page's JSON API, and an
identity provider (JWKS and RFC 7662 introspection) in this process.

The caller's standing goes away while its write waits for people (its static token removed from ``[auth]`` and
the gateway restarted, its scopes cut, its introspected token no longer active, its JWT expired); people then
approve. The resumed call is refused with ``caller_revoked`` naming why: the task ends failed (a tool-approval task:
completed, denied-not-executed), the refusal is audited, the plan is used up, and the backend's database is
unchanged. The store never holds the bearer token in clear. A caller that still stands writes once."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import jwt
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from gateway.approvals.lifecycle import approval_id_for
from tests.support import tasks
from tests.support.approvals import approvals_section, url_mode
from tests.support.asgi import serve_asgi
from tests.support.clients import new_key, preview
from tests.support.configs import config_data, write_toml
from tests.support.processes import free_port, serve
from tests.support.profiles import TENANTS
from tests.system.test_auth import ISSUER, KEY, token
from tests.system.test_tasks import approve

pytestmark = pytest.mark.anyio
BOTH = ["tenants:read", "tenants:reset"]
SECRET = {**os.environ, "GATEWAY_SECRET_KEY": "task-callers-tests-secret-key-0123456789abcdef"}
INTROSPECTION_ENV = {**SECRET, "INTROSPECTION_ID": "gw", "INTROSPECTION_SECRET": "gw-secret"}


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class Gateway:
    """One gateway's files and port: its config is written anew for each start (the operator's edits)."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.db = tmp / "backend.db"
        self.store = tmp / "gateway.db"

    def config(self, auth: dict[str, Any]) -> Path:
        data = config_data(
            TENANTS,
            self.db,
            *TENANTS.seed_demo,
            store=f"sqlite:{self.store}",
            state_dir=self.tmp / "state",
            tools=url_mode(TENANTS.write_tool, timeout=5),
        )
        data["auth"] = {"resource_url": self.url, **auth}
        data["approvals"] = approvals_section(f"http://127.0.0.1:{self.port}")
        return write_toml(data, self.tmp / "gateway.toml")

    def agent(self, bearer: str, *, tool_approval: bool = False) -> Client:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {bearer}"}, timeout=60)
        extensions: list[Any] = [tasks.TasksClient()] + ([tasks.ToolApprovalClient()] if tool_approval else [])
        return Client(streamable_http_client(self.url, http_client=http), extensions=extensions)

    async def approve(self, approval_id: str) -> None:
        await approve(self.port, approval_id)

    async def ended(self, task_id: str, seconds: float = 30) -> dict[str, Any]:
        """The task as the store holds it once it ended (read from the store's own file: its caller may no longer
        be able to ask)."""
        with anyio.fail_after(seconds):
            while True:
                with sqlite3.connect(self.store) as conn:
                    row = conn.execute("SELECT body FROM tasks WHERE task_id = ?", (task_id,)).fetchone()
                found: dict[str, Any] = json.loads(row[0])
                if found["status"] in ("completed", "failed", "cancelled"):
                    return found
                await anyio.sleep(0.2)

    def audited(self, key: str) -> list[tuple[str, str | None]]:
        with sqlite3.connect(self.store) as conn:
            rows = [json.loads(row[0]) for row in conn.execute("SELECT entry FROM audit ORDER BY id")]
        return [(row["outcome"], row["code"]) for row in rows if row.get("idempotency_key") == key]

    def holds(self, secret: str) -> bool:
        """Whether the secret appears anywhere in the store's files (the database and its write-ahead log)."""
        return any(secret.encode() in path.read_bytes() for path in self.tmp.glob("gateway.db*"))

    def backend(self) -> tuple[int, Any]:
        return TENANTS.write_count(self.db), TENANTS.snapshot(self.db, TENANTS.main)


async def waiting_task(gw: Gateway, bearer: str, *, tool_approval: bool = False) -> tuple[str, str, str]:
    """A url-mode write answered with a task: its task id, approval id and idempotency key."""
    async with gw.agent(bearer, tool_approval=tool_approval) as agent:
        plan = await preview(agent, TENANTS)
        key = new_key()
        created = await tasks.call(agent, TENANTS.write_tool, {"planId": plan["planId"], "idempotencyKey": key})
    assert isinstance(created, dict), created
    return created["taskId"], approval_id_for(plan["planId"]), key


ALICE, EVE = "alice-static-token-0123456789", "eve-static-token-0123456789"
SHORT_LIFE = 10
"""Seconds a short-lived JWT stays valid: enough for a preview and a call, not for the approval after them."""


def static(*tokens: tuple[str, list[str]]) -> dict[str, Any]:
    """Static tokens (each its client's name, then ``-static-token-...``) and their scopes."""
    listed = [{"sha256": sha(bearer), "client_id": bearer.split("-")[0], "scopes": scopes} for bearer, scopes in tokens]
    return {"verifier": "static", "tokens": listed}


@pytest.mark.parametrize("tool_approval", [False, True], ids=["tasks", "tool-approval"])
async def test_a_static_token_removed_before_the_approval_writes_nothing(tmp_path: Path, tool_approval: bool) -> None:
    gw = Gateway(tmp_path)
    async with serve(gw.config(static((ALICE, BOTH), (EVE, BOTH))), gw.port, env=SECRET):
        task_id, approval_id, key = await waiting_task(gw, ALICE, tool_approval=tool_approval)
        before = gw.backend()
        assert not gw.holds(ALICE) and gw.holds(sha(ALICE))  # the token's hash, never the token
    # The operator removes alice's token and restarts the gateway; then bob approves her write.
    async with serve(gw.config(static((EVE, BOTH))), gw.port, env=SECRET):
        async with httpx.AsyncClient() as http:
            assert (await http.post(gw.url, headers={"Authorization": f"Bearer {ALICE}"})).status_code == 401
        await gw.approve(approval_id)
        ended = await gw.ended(task_id)
    assert gw.backend() == before
    assert gw.audited(key)[-1] == ("refused", "caller_revoked")
    if tool_approval:
        assert ended["status"] == "completed" and ended["result"]["isError"] is True
        assert ended["result"]["_meta"]["io.modelcontextprotocol/tool-approval-disposition"] == "denied-not-executed"
        assert json.loads(ended["result"]["content"][0]["text"])["code"] == "caller_revoked"
    else:
        assert ended["status"] == "failed"
        assert ended["error"]["data"]["code"] == "caller_revoked"
        assert ended["error"]["data"]["details"]["reason"] == "credential_rejected"
    assert "credential" not in ended["identity"]  # what it kept of the token is gone with the task


async def test_scopes_cut_before_the_approval_refuse_the_write_naming_the_scope(tmp_path: Path) -> None:
    gw = Gateway(tmp_path)
    async with serve(gw.config(static((ALICE, BOTH))), gw.port, env=SECRET):
        task_id, approval_id, key = await waiting_task(gw, ALICE)
        before = gw.backend()
    async with serve(gw.config(static((ALICE, ["tenants:read"]))), gw.port, env=SECRET):
        await gw.approve(approval_id)
        ended = await gw.ended(task_id)
    assert ended["status"] == "failed"
    data = ended["error"]["data"]
    assert (data["code"], data["details"]) == (
        "caller_revoked",
        {"reason": "scope_missing", "missingScopes": ["tenants:reset"]},
    )
    assert gw.backend() == before and gw.audited(key)[-1] == ("refused", "caller_revoked")


async def test_a_caller_that_still_stands_after_a_restart_writes_once(tmp_path: Path) -> None:
    gw = Gateway(tmp_path)
    auth = static((ALICE, BOTH))
    async with serve(gw.config(auth), gw.port, env=SECRET):
        task_id, approval_id, _ = await waiting_task(gw, ALICE)
        before = gw.backend()
    async with serve(gw.config(auth), gw.port, env=SECRET):
        await gw.approve(approval_id)
        ended = await gw.ended(task_id)
    assert ended["status"] == "completed" and not ended["result"].get("isError"), ended
    assert gw.backend()[0] == before[0] + 1


def provider(active: dict[str, dict[str, Any]]) -> Starlette:
    """An identity provider: JWKS for the JWTs, and introspection that answers from ``active`` as it is now."""
    public = jwt.algorithms.RSAAlgorithm.to_jwk(KEY.public_key(), as_dict=True) | {"kid": "k1", "use": "sig"}

    async def jwks(request: Request) -> JSONResponse:
        return JSONResponse({"keys": [public]})

    async def introspect(request: Request) -> JSONResponse:
        form = await request.form()
        return JSONResponse(active.get(str(form.get("token")), {"active": False}))

    return Starlette(routes=[Route("/jwks.json", jwks), Route("/introspect", introspect, methods=["POST"])])


@asynccontextmanager
async def identity_provider(active: dict[str, dict[str, Any]]) -> AsyncIterator[str]:
    port = free_port()
    async with serve_asgi(provider(active), port):
        yield f"http://127.0.0.1:{port}"


async def test_an_introspected_token_no_longer_active_writes_nothing(tmp_path: Path) -> None:
    gw = Gateway(tmp_path)
    active: dict[str, dict[str, Any]] = {}
    async with identity_provider(active) as idp:
        opaque = "opaque-token-of-alice-0123456789"
        active[opaque] = {"active": True, "client_id": "alice", "scope": " ".join(BOTH), "aud": gw.url, "iss": ISSUER}
        introspection = {
            "endpoint": f"{idp}/introspect",
            "issuer": ISSUER,
            "client_id_env": "INTROSPECTION_ID",
            "client_secret_env": "INTROSPECTION_SECRET",
        }
        async with serve(
            gw.config({"verifier": "introspection", "introspection": introspection}), gw.port, env=INTROSPECTION_ENV
        ):
            task_id, approval_id, key = await waiting_task(gw, opaque)
            before = gw.backend()
            held = gw.holds(opaque)
            active[opaque] = {"active": False}  # revoked at the provider
            await gw.approve(approval_id)
            ended = await gw.ended(task_id)
    assert not held, "the store never holds the bearer token in clear"
    assert ended["status"] == "failed" and ended["error"]["data"]["code"] == "caller_revoked"
    assert gw.backend() == before and gw.audited(key)[-1] == ("refused", "caller_revoked")


async def test_a_jwt_that_expired_before_the_approval_writes_nothing(tmp_path: Path) -> None:
    gw = Gateway(tmp_path)
    async with identity_provider({}) as idp:
        auth = {"verifier": "jwt", "jwt": {"issuer": ISSUER, "jwks_url": f"{idp}/jwks.json", "leeway_seconds": 0}}
        async with serve(gw.config(auth), gw.port, env=SECRET):
            # Issued once the gateway is up, and alive long enough to preview and call on a slow machine (a 2-core
            # machine took over 4 s from a token issued before the start): it must expire while people decide.
            short = token(gw.url, client="alice", scopes=" ".join(BOTH), exp=int(time.time()) + SHORT_LIFE)
            task_id, approval_id, key = await waiting_task(gw, short)
            before = gw.backend()
            held = gw.holds(short)
            await until(lambda: time.time() > jwt.decode(short, options={"verify_signature": False})["exp"] + 1)
            await gw.approve(approval_id)
            ended = await gw.ended(task_id)
    assert not held, "the store never holds the bearer token in clear"
    assert ended["status"] == "failed" and ended["error"]["data"]["details"]["reason"] == "credential_rejected"
    assert gw.backend() == before and gw.audited(key)[-1] == ("refused", "caller_revoked")


async def until(done: Callable[[], bool], seconds: float = 30) -> None:
    with anyio.fail_after(seconds):
        while not done():  # noqa: ASYNC110 - the wall clock, polled
            await anyio.sleep(0.1)
