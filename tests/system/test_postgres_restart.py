"""Three real `serve` replicas share one real PostgreSQL in front of one real backend, and only the database is
stopped and started again (the backend never is).

While it is down, every replica's ``/readyz`` answers within its bound and says ``"store": "down"``, and a call
answers the store's own code, ``store_unavailable``, never the backend's; so does a session that cannot open
(HTTP 503, JSON-RPC -32603). Once it is back, each replica's first
call is served: the session the restart ended is replaced and the statement run again (SQLSTATE 57P01 says it
never ran), and a pool still backing off its reconnects does not keep the call waiting
(gateway/stores/postgres/pool.py)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client

from gateway.http.app import READY_WAIT_SECONDS
from tests.support.clients import error_code, http_client
from tests.support.configs import config_data, write_toml
from tests.support.postgres import PostgresServer
from tests.support.processes import free_port, http_backend, serve
from tests.support.profiles import TENANTS

pytestmark = pytest.mark.anyio

PROFILE = TENANTS
TIMEOUT = 2.0
"""The store's ``timeout``: what each operation, a retried one included, has."""


@asynccontextmanager
async def three_replicas(tmp: Path, store: str, era: str) -> AsyncIterator[list[tuple[int, Client]]]:
    """Three `serve` processes on ``store`` over one HTTP backend, each with a connected client."""
    db, backend = tmp / "backend.db", free_port()
    async with AsyncExitStack() as stack:
        await stack.enter_async_context(http_backend(PROFILE, db, backend, *PROFILE.seed_demo))
        replicas = []
        for n in range(3):
            data = config_data(
                PROFILE,
                db,
                store=f"{store}&timeout={TIMEOUT}",
                state_dir=tmp / f"replica{n}",
                backend={"transport": "http", "url": f"http://127.0.0.1:{backend}/mcp"},
            )
            data["backend"] = {key: value for key, value in data["backend"].items() if value is not None}
            port = free_port()
            await stack.enter_async_context(serve(write_toml(data, tmp / f"replica{n}.toml"), port))
            client = await stack.enter_async_context(http_client(era, f"http://127.0.0.1:{port}/mcp"))
            replicas.append((port, client))
        yield replicas


async def readiness(port: int) -> tuple[float, int, dict[str, object]]:
    """How long ``/readyz`` took, its status and its body."""
    started = time.monotonic()
    async with httpx2.AsyncClient(timeout=30) as http:
        answer = await http.get(f"http://127.0.0.1:{port}/readyz")
    return time.monotonic() - started, answer.status_code, answer.json()


async def open_session(port: int) -> httpx2.Response:
    """A 2025-11-25 ``initialize`` over plain HTTP: it opens a session, which takes a token from the store."""
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}
    async with httpx2.AsyncClient(timeout=30) as http:
        return await http.post(f"http://127.0.0.1:{port}/mcp", json=request, headers=headers)


async def test_after_a_database_restart_every_replica_serves_its_first_call_and_the_store_is_named_meanwhile(
    tmp_path: Path, postgres_server: PostgresServer, postgres_url: str, era: str
) -> None:
    try:
        async with three_replicas(tmp_path, postgres_url, era) as replicas:
            for _, client in replicas:  # every replica has a pooled connection in steady use
                assert not (await client.call_tool(PROFILE.list_tool, {})).is_error

            postgres_server.stop("fast")
            for port, client in replicas:
                took, status, body = await readiness(port)
                assert (status, body["store"], body["backend"]) == (503, "down", "up"), body
                assert took < READY_WAIT_SECONDS + 1.5, f"/readyz took {took:.1f} s on {port}"
                with anyio.fail_after(TIMEOUT + 10):
                    down = await client.call_tool(PROFILE.list_tool, {})
                assert error_code(down) == "store_unavailable", down.content

            opening = await open_session(replicas[0][0])
            assert opening.status_code == 503, opening.text
            assert opening.json()["error"]["code"] == -32603  # the server's fault, not an invalid request
            assert opening.json()["error"]["data"] == {"code": "store_unavailable"}

            postgres_server.start()
            for port, client in replicas:
                with anyio.fail_after(TIMEOUT + 10):
                    first = await client.call_tool(PROFILE.list_tool, {})
                assert not first.is_error, f"replica on {port}: {first.content}"
                took, status, body = await readiness(port)
                assert (status, body["store"]) == (200, "up"), body

            # Restarted with no call in between: each replica's pooled connection was ended by the server.
            postgres_server.stop("fast")
            postgres_server.start()
            for port, client in replicas:
                with anyio.fail_after(TIMEOUT + 10):
                    first = await client.call_tool(PROFILE.list_tool, {})
                assert not first.is_error, f"replica on {port}: {first.content}"
    finally:
        if not postgres_server.running():
            postgres_server.start()
