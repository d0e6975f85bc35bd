"""Shared test harness: real backend processes, real SDK clients, real SQLite files.

Every safety test runs once per profile (tests/profiles.py): the default ``manage_tenant`` god-tool and a
differently shaped ``manage_flags`` one, each wrapped by its own config file. The gateway spawns the backend
itself (a stdio child, as in the default config) and is shared by every in-memory client of a module; tests
assert on the backend's own SQLite file.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
from mcp import Client

from gateway.config import GatewayConfig, load_config, parse_config, to_toml
from gateway.runtime import Gateway, open_gateway
from gateway.server import build_server
from tests.profiles import PROFILES, Profile

ERAS = ["2025-11-25", "2026-07-28"]


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module", params=PROFILES, ids=str)
def profile(request: pytest.FixtureRequest) -> Profile:
    """The god-tool under test; module-scoped so that each module's shared gateway serves one profile."""
    return request.param  # type: ignore[no-any-return]


@pytest.fixture(params=ERAS)
def era(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def config_data(
    profile: Profile,
    db: Path,
    *backend_args: str,
    store: str = "memory",
    state_dir: Path,
    tools: Callable[[dict[str, Any]], None] | None = None,
    backend: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The profile's config file as data, over a stdio backend on ``db``, with state under ``state_dir``."""
    data = load_config(profile.config).model_dump(by_alias=True, exclude_none=True)
    data["gateway"] = {**data["gateway"], "store": store, "state_dir": str(state_dir)}
    data["rate_limits"] = {"per_caller": None}  # the tests' single caller makes calls far faster than a user
    data["backend"] = {
        **data["backend"],
        "transport": "stdio",
        "command": sys.executable,
        "args": ["-m", profile.backend_module, "--stdio", "--db", str(db), *backend_args],
        "call_timeout_seconds": 20,
        **(backend or {}),
    }
    if tools is not None:
        tools(data["tools"])
    return data


def gateway_config(profile: Profile, db: Path, *backend_args: str, **options: Any) -> GatewayConfig:
    """config_data, validated."""
    return parse_config(config_data(profile, db, *backend_args, **options))


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


def connect(gw: Gateway, era: str, answers: Any = None) -> Client:
    """A real SDK client, in memory, speaking one protocol era; it can answer prompts when given answers."""
    server = build_server(gw)
    mode = "legacy" if era == "2025-11-25" else "auto"
    return Client(server, mode=mode, elicitation_callback=answers)


def error_code(result: types.CallToolResult) -> str:
    """The stable code of an isError result (which must carry no structuredContent)."""
    assert result.is_error, result
    assert result.structured_content is None
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return str(json.loads(block.text)["code"])


def error_body(result: types.CallToolResult) -> dict[str, Any]:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return dict(json.loads(block.text))


def new_key() -> str:
    return str(uuid.uuid4())


async def preview(client: Client, profile: Profile, target: str | None = None, variant: int = 0) -> dict[str, Any]:
    """A plan for ``target`` (the profile's main one by default)."""
    result = await client.call_tool(profile.preview_tool, profile.preview_args(target, variant))
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


def applied_body(plan: dict[str, Any], version: int, replayed: bool = False) -> dict[str, Any]:
    """What a write reports for a plan: the plan's fields, the version after, and whether it replayed."""
    body = {name: value for name, value in plan.items() if name != "expiresAt"}
    return {**body, "version": version, "replayed": replayed}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def wait_for_port(port: int, exited: Callable[[], bool] = lambda: False) -> None:
    """Until something accepts connections on the loopback port; fails at once if ``exited()`` says the
    process that should listen there is gone."""
    with anyio.fail_after(60):
        while True:
            assert not exited(), f"the process meant to listen on {port} exited during start-up"
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
    child = subprocess.Popen(args, **popen)  # noqa: ASYNC220 - a quick fork; the wait below is async
    try:
        if port is not None:
            await wait_for_port(port, lambda: child.poll() is not None)
        yield child
    finally:
        child.terminate()
        try:
            child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def http_backend(profile: Profile, db: Path, port: int, *extra: str) -> Any:
    """The profile's backend over streamable HTTP on a loopback port."""
    args = [sys.executable, "-m", profile.backend_module, "--http", f"127.0.0.1:{port}", "--db", str(db), *extra]
    return process(args, port)


def write_toml(data: dict[str, Any], path: Path) -> Path:
    """Write config data as a TOML file."""
    path.write_text(to_toml(data))
    return path


def write_config(profile: Profile, tmp: Path) -> Path:
    """The profile's config with the backend's database, the SQLite store and the state kept under ``tmp``."""
    data = config_data(
        profile, tmp / "backend.db", *profile.seed_demo, store=f"sqlite:{tmp}/gateway.db", state_dir=tmp / "state"
    )
    return write_toml(data, tmp / "gateway.toml")


def serve(config: Path, port: int, stderr: Any = subprocess.DEVNULL, **popen: Any) -> Any:
    """``mcp-safety-gateway serve`` as a real process on a loopback port."""
    args = [sys.executable, "-m", "gateway", "serve", "--config", str(config), "--port", str(port)]
    return process(args, port, stderr=stderr, **popen)


REDIS_MISSING = "redis-server is not installed: apt-get install redis-server (CI runs .ci/setup-redis.sh)"


@contextmanager
def redis_process(directory: Path, port: int, *, aof: bool = False) -> Iterator[subprocess.Popen[bytes]]:
    """A real redis-server on a loopback port, answering PING when yielded, killed (SIGKILL) afterwards.

    ``aof=True`` keeps an append-only file in ``directory``, fsynced on every write, so a restart on the same
    directory has every acknowledged write; otherwise nothing is persisted.
    """
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip(REDIS_MISSING)
    directory.mkdir(parents=True, exist_ok=True)
    persistence = ["--appendonly", "yes", "--appendfsync", "always"] if aof else ["--appendonly", "no"]
    args = [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(directory), "--save", "", *persistence]
    with (directory / "redis.log").open("ab") as log:
        child = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
    try:
        _wait_for_pong(port, child)
        yield child
    finally:
        child.kill()
        child.wait()


def _wait_for_pong(port: int, child: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 20
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
                sock.sendall(b"PING\r\n")
                if sock.recv(64).startswith(b"+PONG"):  # "-LOADING" while it replays its append-only file
                    return
        except OSError:
            pass
        if child.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"redis-server on port {port} did not start")
        time.sleep(0.01)


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One real redis-server for the test session (no persistence); its URL."""
    port = free_port()
    with redis_process(tmp_path_factory.mktemp("redis"), port):
        yield f"redis://127.0.0.1:{port}/0"


@pytest.fixture
def redis_url(redis_server: str) -> str:
    """The session's Redis, emptied for this test."""
    import redis

    with redis.Redis.from_url(redis_server) as client:
        client.flushall()
    return redis_server
