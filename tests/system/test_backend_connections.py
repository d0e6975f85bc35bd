"""The gateway reuses its connections to an HTTP backend: a real ``serve`` over the demo backend on streamable HTTP,
with a counting TCP relay between them, and many calls from a real SDK client. Each backend request must not cost
a new TCP (and, in production, TLS) handshake: the calls' requests travel over a handful of kept-alive
connections."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from anyio.abc import SocketStream
from mcp import Client

from tests.support.clients import preview, until_reachable
from tests.support.configs import config_data, write_toml
from tests.support.processes import free_port, http_backend, serve
from tests.support.profiles import TENANTS

pytestmark = pytest.mark.anyio
CALLS = 30


class Relay:
    """A TCP relay to the backend that counts the connections it accepts and the HTTP requests sent through."""

    def __init__(self, backend_port: int) -> None:
        self.backend_port = backend_port
        self.connections = 0
        self.requests = 0

    async def serve(self, port: int, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=port)
        task_status.started()
        await listener.serve(self.relay)

    async def relay(self, client: SocketStream) -> None:
        self.connections += 1
        backend = await anyio.connect_tcp("127.0.0.1", self.backend_port)
        async with client, backend, anyio.create_task_group() as pipes:
            pipes.start_soon(self.pipe, client, backend, True)
            await self.pipe(backend, client, False)
            pipes.cancel_scope.cancel()

    async def pipe(self, source: SocketStream, sink: SocketStream, counted: bool) -> None:
        try:
            async for chunk in source:
                if counted:
                    self.requests += chunk.count(b"POST /mcp ") + chunk.count(b"GET /mcp ")
                await sink.send(chunk)
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass


async def test_calls_reuse_a_few_kept_alive_connections_to_an_http_backend(tmp_path: Path) -> None:
    backend_port, relay_port, port = free_port(), free_port(), free_port()
    db = tmp_path / "backend.db"
    backend = {"transport": "http", "url": f"http://127.0.0.1:{relay_port}/mcp"}
    data = config_data(
        TENANTS, db, store=f"sqlite:{tmp_path}/gateway.db", state_dir=tmp_path / "state", backend=backend
    )
    config = write_toml(data, tmp_path / "gateway.toml")
    relay = Relay(backend_port)
    async with anyio.create_task_group() as background:
        await background.start(relay.serve, relay_port)
        gateway = serve(config, port)
        client = Client(f"http://127.0.0.1:{port}/mcp")
        async with http_backend(TENANTS, db, backend_port, *TENANTS.seed_demo), gateway, client:
            await until_reachable(lambda: client.call_tool(TENANTS.list_tool, {}))
            before = relay.requests
            for number in range(CALLS):
                await preview(client, TENANTS, TENANTS.main if number % 2 else TENANTS.other)
            sent = relay.requests - before
        background.cancel_scope.cancel()
    assert sent >= CALLS, sent  # every preview read the backend
    assert relay.connections <= 4, (relay.connections, relay.requests)
