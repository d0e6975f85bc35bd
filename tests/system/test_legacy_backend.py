"""The legacy backend as a real process, driven by the real MCP SDK client over stdio and streamable HTTP."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, closing
from pathlib import Path
from typing import Any, TextIO

import anyio
import httpx2
import pytest
from anyio.abc import Process
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, TextContent

from legacy_backend.faults import FaultSpec, parse_fault_spec, parse_fault_specs, specs_from_env
from tests.support.processes import free_port, wait_for_port

TOOL = "manage_tenant"
DEMO_IDS = ["tn_billing03", "tn_checkout01", "tn_load04", "tn_prod_eu", "tn_search02"]
# Startup includes the first (cold) import of the MCP SDK, which can take seconds on a small CI machine.
STARTUP_TIMEOUT = 60.0
CALL_TIMEOUT = 30.0


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


# -- helpers -------------------------------------------------------------------------------------------------


def _backend_args(db: Path, *extra: str) -> list[str]:
    return ["-m", "legacy_backend", "--db", str(db), *extra]


@asynccontextmanager
async def stdio_backend(
    db: Path, *extra: str, errlog: TextIO, env: dict[str, str] | None = None
) -> AsyncIterator[Client]:
    """A legacy backend subprocess on stdio, connected with the SDK client."""
    params = StdioServerParameters(command=sys.executable, args=_backend_args(db, "--stdio", *extra), env=env)
    # read_timeout_seconds bounds `initialize` (a cancel scope cannot span a yield in a fixture).
    transport = stdio_client(params, errlog=errlog)
    async with Client(transport, mode="legacy", read_timeout_seconds=STARTUP_TIMEOUT) as client:
        yield client


async def call(client: Client, action: str, payload: dict[str, Any] | None = None) -> CallToolResult:
    """One `manage_tenant` call, bounded in time."""
    arguments: dict[str, Any] = {"action": action}
    if payload is not None:
        arguments["payload"] = payload
    with anyio.fail_after(CALL_TIMEOUT):
        return await client.call_tool(TOOL, arguments)


def text_of(result: CallToolResult) -> str:
    """The single text block of a result."""
    assert len(result.content) == 1
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


async def ok(client: Client, action: str, payload: dict[str, Any] | None = None) -> Any:
    """Call and parse a successful JSON result."""
    result = await call(client, action, payload)
    assert not result.is_error, text_of(result)
    assert result.structured_content is None
    return json.loads(text_of(result))


async def error(client: Client, action: str, payload: dict[str, Any] | None = None) -> str:
    """Call and return the text of an isError result."""
    result = await call(client, action, payload)
    assert result.is_error, text_of(result)
    return text_of(result)


def query(db: Path, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    """Read the backend's SQLite file directly."""
    with closing(sqlite3.connect(db)) as conn:
        return conn.execute(sql, params).fetchall()


def write_count(db: Path) -> int:
    return int(query(db, "SELECT COUNT(*) FROM write_log")[0][0])


def fault_fires(db: Path, name: str) -> int:
    rows = query(db, "SELECT fired FROM fault_fires WHERE name = ?", name)
    return int(rows[0][0]) if rows else 0


@pytest.fixture
def errlog(tmp_path: Path) -> Iterator[TextIO]:
    with (tmp_path / "backend.stderr").open("w") as f:
        yield f


# -- one shared demo backend for the read/write behaviour -------------------------------------------------


@pytest.fixture(scope="module")
def shared_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("shared") / "nested" / "legacy.db"


@pytest.fixture(scope="module")
async def shared(shared_db: Path, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Client]:
    with (tmp_path_factory.mktemp("shared-log") / "backend.stderr").open("w") as log:
        async with stdio_backend(shared_db, "--seed-demo", errlog=log) as client:
            yield client


@pytest.mark.anyio
async def test_tools_list_is_one_bare_tool(shared: Client) -> None:
    with anyio.fail_after(CALL_TIMEOUT):
        tools = (await shared.list_tools()).tools
    assert [t.name for t in tools] == [TOOL]
    tool = tools[0]
    assert tool.annotations is None
    assert tool.output_schema is None
    assert tool.input_schema["properties"]["action"]["type"] == "string"
    assert tool.input_schema["properties"]["payload"]["type"] == "object"
    assert tool.input_schema["required"] == ["action"]


@pytest.mark.anyio
async def test_list_get_fixtures(shared: Client, shared_db: Path) -> None:
    tenants = (await ok(shared, "list"))["tenants"]
    ids = [t["id"] for t in tenants]
    assert ids == sorted(ids)
    assert set(DEMO_IDS) <= set(ids)

    prod = await ok(shared, "get", {"id": "tn_prod_eu"})
    assert prod == {"id": "tn_prod_eu", "name": "Production EU", "rows": 25, "version": 1, "protected": True}
    load = await ok(shared, "get", {"id": "tn_load04"})
    assert load == {"id": "tn_load04", "name": "Load test", "rows": 5000, "version": 1, "protected": False}
    assert load in tenants

    assert await ok(shared, "fixtures") == {"fixtures": {"empty": 0, "smoke": 25, "checkout": 812, "load": 5000}}
    assert query(shared_db, "SELECT COUNT(*) FROM rows WHERE tenant_id = 'tn_checkout01'") == [(812,)]


@pytest.mark.anyio
async def test_reseed_writes_rows_version_and_one_log_row(shared: Client, shared_db: Path) -> None:
    before = await ok(shared, "get", {"id": "tn_search02"})
    writes = write_count(shared_db)

    result = await ok(shared, "reseed", {"id": "tn_search02", "fixture": "checkout"})
    assert result == {
        "id": "tn_search02",
        "fixture": "checkout",
        "rowsDeleted": before["rows"],
        "rowsInserted": 812,
        "version": before["version"] + 1,
    }
    after = await ok(shared, "get", {"id": "tn_search02"})
    assert after["rows"] == 812
    assert after["version"] == before["version"] + 1
    assert write_count(shared_db) == writes + 1
    last = query(shared_db, "SELECT action, tenant_id, detail FROM write_log ORDER BY id DESC LIMIT 1")[0]
    assert last[:2] == ("reseed", "tn_search02")
    assert json.loads(last[2]) == result


@pytest.mark.anyio
async def test_wipe_and_create(shared: Client, shared_db: Path) -> None:
    writes = write_count(shared_db)
    created = await ok(shared, "create", {"id": "tn_new01", "name": "New QA", "protected": True})
    assert created == {"id": "tn_new01", "name": "New QA", "rows": 0, "version": 1, "protected": True}
    reseeded = await ok(shared, "reseed", {"id": "tn_new01", "fixture": "smoke"})
    assert reseeded["version"] == 2
    # `protected` is ignored by the backend: the wipe goes through.
    assert await ok(shared, "wipe", {"id": "tn_new01"}) == {"id": "tn_new01", "rowsDeleted": 25, "version": 3}
    assert (await ok(shared, "get", {"id": "tn_new01"}))["rows"] == 0
    assert write_count(shared_db) == writes + 3

    assert await error(shared, "create", {"id": "tn_new01", "name": "Again"}) == "Tenant tn_new01 already exists"
    plain = await ok(shared, "create", {"id": "tn_new02", "name": "Plain"})
    assert plain["protected"] is False
    assert write_count(shared_db) == writes + 4


@pytest.mark.anyio
async def test_errors_are_is_error_results(shared: Client, shared_db: Path) -> None:
    writes = write_count(shared_db)
    assert (await error(shared, "explode")).startswith("Unknown action 'explode'")
    assert await error(shared, "get", {"id": "tn_nope"}) == "Tenant tn_nope not found"
    assert await error(shared, "wipe", {"id": "tn_nope"}) == "Tenant tn_nope not found"
    assert await error(shared, "reseed", {"id": "tn_nope", "fixture": "smoke"}) == "Tenant tn_nope not found"
    assert await error(shared, "get") == "Missing required field 'id' in payload for action 'get'"
    assert await error(shared, "get", {"id": 7}) == "Field 'id' must be a string"
    assert await error(shared, "reseed", {"id": "tn_billing03"}) == (
        "Missing required field 'fixture' in payload for action 'reseed'"
    )
    assert (await error(shared, "reseed", {"id": "tn_billing03", "fixture": "huge"})).startswith(
        "Unknown fixture 'huge'"
    )
    assert await error(shared, "create", {"id": "tn_x", "name": "X", "protected": "yes"}) == (
        "Field 'protected' must be a boolean"
    )
    # Schema-level violations are rejected by the SDK, still as isError results.
    with anyio.fail_after(CALL_TIMEOUT):
        bad = await shared.call_tool(TOOL, {"action": "get", "payload": "not an object"})
    assert bad.is_error
    assert write_count(shared_db) == writes


# -- faults: one process (and database) each ---------------------------------------------------------------


@pytest.mark.anyio
async def test_fail_before_write_from_env(tmp_path: Path, errlog: TextIO) -> None:
    db = tmp_path / "legacy.db"
    env = {"LEGACY_FAULT": "fail-before-write:1"}
    async with stdio_backend(db, "--seed-demo", errlog=errlog, env=env) as client:
        assert write_count(db) == 0  # seeding writes no log rows
        assert await error(client, "wipe", {"id": "tn_checkout01"}) == "Internal error: storage unavailable"
        assert write_count(db) == 0
        assert (await ok(client, "get", {"id": "tn_checkout01"}))["rows"] == 812
        # Fired once; the next write goes through.
        assert (await ok(client, "wipe", {"id": "tn_checkout01"}))["version"] == 2
        assert write_count(db) == 1
    assert fault_fires(db, "fail-before-write") == 1


@pytest.mark.anyio
async def test_drop_after_write_fires_once_across_restarts(tmp_path: Path, errlog: TextIO) -> None:
    db = tmp_path / "legacy.db"
    async with stdio_backend(db, "--seed-demo", "--fault", "drop-after-write:1", errlog=errlog) as client:
        with pytest.raises(MCPError) as caught:
            await call(client, "reseed", {"id": "tn_billing03", "fixture": "smoke"})
        assert caught.value.code == -32000
    assert write_count(db) == 1  # committed before the process died
    assert query(
        db,
        "SELECT rows, version FROM (SELECT COUNT(*) AS rows FROM rows WHERE tenant_id = ?), "
        "(SELECT version FROM tenants WHERE id = ?)",
        "tn_billing03",
        "tn_billing03",
    ) == [(25, 2)]
    assert fault_fires(db, "drop-after-write") == 1

    async with stdio_backend(db, "--seed-demo", "--fault", "drop-after-write:1", errlog=errlog) as client:
        result = await ok(client, "reseed", {"id": "tn_billing03", "fixture": "empty"})
        assert result == {"id": "tn_billing03", "fixture": "empty", "rowsDeleted": 25, "rowsInserted": 0, "version": 3}
    assert write_count(db) == 2
    assert fault_fires(db, "drop-after-write") == 1


@pytest.mark.anyio
async def test_malformed_after_write_commits_and_answers_garbage(tmp_path: Path, errlog: TextIO) -> None:
    db = tmp_path / "legacy.db"
    async with stdio_backend(db, "--seed-demo", "--fault", "malformed-after-write", errlog=errlog) as client:
        result = await call(client, "wipe", {"id": "tn_search02"})
        assert not result.is_error
        with pytest.raises(json.JSONDecodeError):
            json.loads(text_of(result))
        assert write_count(db) == 1
        assert await ok(client, "get", {"id": "tn_search02"}) == {
            "id": "tn_search02",
            "name": "Search QA",
            "rows": 0,
            "version": 2,
            "protected": False,
        }
        # Reads are never affected; without a limit the fault fires on every write.
        result = await call(client, "create", {"id": "tn_m", "name": "M"})
        with pytest.raises(json.JSONDecodeError):
            json.loads(text_of(result))
    assert write_count(db) == 2
    assert fault_fires(db, "malformed-after-write") == 2


@pytest.mark.anyio
async def test_latency_delays_writes_but_not_the_server(tmp_path: Path, errlog: TextIO) -> None:
    db = tmp_path / "legacy.db"
    delay = 1.5
    async with stdio_backend(db, "--seed-demo", "--fault", f"latency={int(delay * 1000)}:1", errlog=errlog) as client:
        finished: dict[str, float] = {}
        start = time.monotonic()

        async def slow_write() -> None:
            await ok(client, "wipe", {"id": "tn_load04"})
            finished["write"] = time.monotonic() - start

        async with anyio.create_task_group() as tg:
            tg.start_soon(slow_write)
            await ok(client, "get", {"id": "tn_prod_eu"})
            finished["read"] = time.monotonic() - start
        assert finished["write"] >= delay
        assert finished["read"] < finished["write"]
        assert write_count(db) == 1

        # Fired once: the next write is immediate.
        start = time.monotonic()
        await ok(client, "wipe", {"id": "tn_load04"})
        assert time.monotonic() - start < delay
    assert fault_fires(db, "latency") == 1


# -- HTTP transport -----------------------------------------------------------------------------------------


@asynccontextmanager
async def http_backend(db: Path, *extra: str, errlog: TextIO) -> AsyncIterator[tuple[str, Process]]:
    """A legacy backend subprocess serving streamable HTTP; yields its /mcp URL and process."""
    port = free_port()
    args = [sys.executable, *_backend_args(db, "--http", f"127.0.0.1:{port}", *extra)]
    proc = await anyio.open_process(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=errlog)
    try:
        await wait_for_port(port, lambda: proc.returncode is not None)
        yield f"http://127.0.0.1:{port}/mcp", proc
    finally:
        if proc.returncode is None:
            proc.terminate()
        with anyio.fail_after(CALL_TIMEOUT, shield=True):
            await proc.wait()
        await proc.aclose()


@pytest.mark.anyio
async def test_http_transport(tmp_path: Path, errlog: TextIO) -> None:
    db = tmp_path / "legacy.db"
    async with http_backend(db, "--seed-demo", "--seed-tenants", "3", errlog=errlog) as (url, _proc):
        with anyio.fail_after(STARTUP_TIMEOUT):
            async with Client(streamable_http_client(url), mode="legacy") as client:
                tools = (await client.list_tools()).tools
                assert [(t.name, t.annotations, t.output_schema) for t in tools] == [(TOOL, None, None)]
                ids = [t["id"] for t in (await ok(client, "list"))["tenants"]]
                assert ids == sorted([*DEMO_IDS, "tn_bulk000001", "tn_bulk000002", "tn_bulk000003"])
                result = await ok(client, "reseed", {"id": "tn_bulk000002", "fixture": "smoke"})
                assert result["rowsInserted"] == 25
                assert result["version"] == 2
                assert await error(client, "get", {"id": "tn_nope"}) == "Tenant tn_nope not found"
    assert write_count(db) == 1


@pytest.mark.anyio
async def test_http_drop_after_write_drops_the_connection(tmp_path: Path, errlog: TextIO) -> None:
    db = tmp_path / "legacy.db"
    async with http_backend(db, "--seed-demo", "--fault", "drop-after-write:1", errlog=errlog) as (url, proc):
        failure: Exception | None = None
        with anyio.fail_after(STARTUP_TIMEOUT):
            try:
                async with Client(streamable_http_client(url), mode="legacy") as client:
                    await call(client, "wipe", {"id": "tn_load04"})
            except (MCPError, ExceptionGroup) as exc:
                failure = exc
        # mcp 2.3.0: a POST whose connection drops is not turned into an error for that request; the
        # transport's task group dies, the call is cancelled and the Client exits with the httpx2 error.
        if isinstance(failure, ExceptionGroup):
            assert failure.subgroup(httpx2.TransportError) is not None, failure
        else:
            assert isinstance(failure, MCPError)
        with anyio.fail_after(CALL_TIMEOUT):
            assert await proc.wait() == 1
    assert write_count(db) == 1
    assert fault_fires(db, "drop-after-write") == 1


# -- process hygiene and spec parsing ----------------------------------------------------------------------


def test_stdio_stdout_carries_only_protocol(tmp_path: Path) -> None:
    db = tmp_path / "legacy.db"
    messages = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": TOOL, "arguments": {"action": "reseed", "payload": {"id": "tn_x", "fixture": "smoke"}}},
        },
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": TOOL, "arguments": {"action": "?"}}},
    ]
    proc = subprocess.Popen(
        [sys.executable, *_backend_args(db, "--stdio", "--seed-demo", "--fault", "latency=10")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("".join(json.dumps(m) + "\n" for m in messages))
    proc.stdin.flush()
    replies = [json.loads(proc.stdout.readline()) for _ in range(3)]
    _, stderr = proc.communicate(timeout=CALL_TIMEOUT)
    assert proc.returncode == 0
    assert [r["id"] for r in sorted(replies, key=lambda r: r["id"])] == [1, 2, 3]
    assert all(r["result"]["isError"] for r in replies if r["id"] in (2, 3))
    assert "Traceback" not in stderr


def test_bad_fault_spec_is_a_usage_error(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, *_backend_args(tmp_path / "x.db", "--stdio", "--fault", "explode")],
        capture_output=True,
        text=True,
        timeout=STARTUP_TIMEOUT,
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "unknown fault 'explode'" in proc.stderr


def test_parse_fault_specs() -> None:
    assert parse_fault_spec("latency=250") == FaultSpec("latency", 250, None)
    assert parse_fault_spec("latency=250:3") == FaultSpec("latency", 250, 3)
    assert parse_fault_spec("drop-after-write:1") == FaultSpec("drop-after-write", None, 1)
    assert parse_fault_spec(" fail-before-write ") == FaultSpec("fail-before-write", None, None)
    assert parse_fault_spec("deep-after-write") == FaultSpec("deep-after-write", 100_000, None)
    assert parse_fault_spec("huge-after-write=4096:1") == FaultSpec("huge-after-write", 4096, 1)
    bad_specs = ("huge-after-write", "string-version-after-write=1", "deep-after-write=x")
    for bad in (
        "latency",
        "latency=x",
        "drop-after-write=1",
        "nope",
        "malformed-after-write:-1",
        "latency=5:z",
        *bad_specs,
    ):
        with pytest.raises(ValueError):
            parse_fault_spec(bad)
    assert specs_from_env({"LEGACY_FAULT": "latency=5, drop-after-write:1,"}) == ["latency=5", "drop-after-write:1"]
    assert parse_fault_specs(["latency=5", "latency=9:2"]) == {"latency": FaultSpec("latency", 9, 2)}
