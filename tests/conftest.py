"""Shared test harness: a real legacy-backend process per module, real SDK clients, real SQLite files.

The gateway spawns the backend itself (a stdio child, as in the default config) and is shared by every
in-memory client of a module; tests assert on the backend's own SQLite file.
"""

from __future__ import annotations

import sqlite3
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
from mcp import Client

from gateway.config import GatewayConfig, load_config, parse_config
from gateway.runtime import Gateway, open_gateway
from gateway.server import build_server

ERAS = ["2025-11-25", "2026-07-28"]


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"


def gateway_config(
    db: Path,
    *backend_args: str,
    store: str = "memory",
    state_dir: Path,
    tools: dict[str, Any] | None = None,
    backend: dict[str, Any] | None = None,
    base: Path | None = None,
    backend_module: str = "legacy_backend",
) -> GatewayConfig:
    """A config file's tools and lookups (the default file unless ``base``) over a stdio backend on ``db``."""
    data = load_config(base).model_dump(by_alias=True, exclude_none=True)
    data["gateway"] = {**data["gateway"], "store": store, "state_dir": str(state_dir)}
    data["backend"] = {
        **data["backend"],
        "transport": "stdio",
        "command": sys.executable,
        "args": ["-m", backend_module, "--stdio", "--db", str(db), *backend_args],
        "call_timeout_seconds": 20,
        **(backend or {}),
    }
    if tools is not None:
        data["tools"] = tools
    return parse_config(data)


class Clock:
    """A settable clock for plan expiry."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset


@asynccontextmanager
async def running_gateway(config: GatewayConfig, clock: Clock | None = None) -> AsyncIterator[Gateway]:
    async with open_gateway(config, clock=clock or Clock()) as gw:
        with anyio.fail_after(60):
            await gw.catalog()  # starts the backend child, so tests can read its database
        yield gw


class Answers:
    """An elicitation callback that answers from a script and records every prompt."""

    def __init__(self, action: str = "accept", content: dict[str, Any] | None = None) -> None:
        self.action = action
        self.content = {"confirm": True} if content is None else content
        self.prompts: list[types.ElicitRequestParams] = []

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.prompts.append(params)
        if self.action == "accept":
            return types.ElicitResult(action="accept", content=self.content)
        return types.ElicitResult(action=self.action)  # type: ignore[arg-type]


def connect(gw: Gateway, era: str, answers: Answers | None = None) -> Client:
    """A real SDK client, in memory, speaking one protocol era; it can answer prompts when given answers."""
    server = build_server(gw)
    mode = "legacy" if era == "2025-11-25" else "auto"
    return Client(server, mode=mode, elicitation_callback=answers)  # type: ignore[arg-type]


def write_count(db: Path) -> int:
    """Writes the backend has committed, from its own write_log."""
    with sqlite3.connect(db) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM write_log").fetchone()[0])


def tenant_state(db: Path, tenant_id: str) -> tuple[int, int]:
    """(version, rows) of a tenant, read from the backend's file."""
    with sqlite3.connect(db) as conn:
        version = conn.execute("SELECT version FROM tenants WHERE id = ?", (tenant_id,)).fetchone()[0]
        rows = conn.execute("SELECT COUNT(*) FROM rows WHERE tenant_id = ?", (tenant_id,)).fetchone()[0]
    return int(version), int(rows)


def error_code(result: types.CallToolResult) -> str:
    """The stable code of an isError result."""
    import json

    assert result.is_error, result
    assert result.structured_content is None
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return str(json.loads(block.text)["code"])


def new_key() -> str:
    return str(uuid.uuid4())


async def preview(client: Client, tenant_id: str = "tn_checkout01", fixture: str = "empty") -> dict[str, Any]:
    result = await client.call_tool("preview_tenant_reset", {"tenantId": tenant_id, "fixture": fixture})
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


Call = Callable[..., Awaitable[types.CallToolResult]]


def within(seconds: float = 60) -> Any:
    return anyio.fail_after(seconds)


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def wait_for_port(port: int) -> None:
    with anyio.fail_after(60):
        while True:
            try:
                stream = await anyio.connect_tcp("127.0.0.1", port)
            except OSError:
                await anyio.sleep(0.05)
                continue
            await stream.aclose()
            return


@asynccontextmanager
async def process(args: list[str], port: int | None = None, **popen: Any) -> AsyncIterator[Any]:
    """A real child process, waited for (its port open) and terminated afterwards."""
    import subprocess

    child = subprocess.Popen(args, **popen)  # noqa: ASYNC220 - a quick fork; the wait below is async
    try:
        if port is not None:
            await wait_for_port(port)
        yield child
    finally:
        child.terminate()
        try:
            child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def http_backend(db: Path, port: int, *extra: str) -> Any:
    """legacy-backend over streamable HTTP on a loopback port."""
    args = [sys.executable, "-m", "legacy_backend", "--http", f"127.0.0.1:{port}", "--db", str(db), *extra]
    return process(args, port)
