"""``python -m bench.profile``: a read's and a confirmed write's CPU time by layer, from cProfile, in one command.

A real gateway (real backend child over stdio, real store) is driven in process by an SDK client, as in
``bench.inprocess``, under ``cProfile``. Each function's own time (``tottime``) is put in one layer by the file
it lives in: the SDK's JSON-RPC and server machinery, validation (pydantic, jsonschema), the gateway's own steps,
the backend client (``gateway/backend`` and the stdio streams), the store, the event loop, and the rest. The
timer is the event-loop thread's CPU time (``time.thread_time``), so waiting on the backend child or on fsync,
and work in worker threads, is not counted; a C builtin's time goes to the layers of its callers. The in-memory
SDK client runs in the same process: its work shows in the JSON-RPC/SDK and ``mcp/client`` (counted with the
backend client) rows; its check of ``structuredContent`` against the outputSchema (jsonschema) runs with the
profiler paused, so the jsonschema row is the gateway's own. With ``--http ERA`` the reads go through the whole
HTTP stack instead: a real ``serve`` (uvicorn and the app) runs in process and a wire client (bench.wire) in a
child process drives it in that era, so the HTTP server row is in the table and no client work is. cProfile's own
overhead inflates every row: compare shares, and runs of this command before and after a change, not its figures
with bench/run's.

    python -m bench.profile [--store sqlite|memory|redis|postgres] [--calls 300] [--top 15 [--layer gateway]]
                            [--http 2025-11-25|2026-07-28]
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import signal
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterator
from contextlib import ExitStack, contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.client.session import ClientSession

from bench import procs
from bench.inprocess import DEMO_TARGETS
from gateway.config import load_config
from gateway.mcp.server import build_server
from gateway.runtime import open_gateway
from tests.support.clients import accept

# First match wins: (layer, fragments of a function's file path).
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("store", ("/gateway/stores/", "sqlite3", "/redis/", "/psycopg", "/asyncpg/")),
    ("backend client", ("/gateway/backend/", "/mcp/client/", "/mcp/shared/session", "/mcp/os/")),
    ("validation: jsonschema", ("/jsonschema", "/referencing/", "/rpds", "/attrs/", "<attrs generated")),
    ("validation: pydantic", ("/pydantic", "/annotated_types/")),
    ("HTTP server", ("/uvicorn/", "/starlette/", "/h11/", "/httptools/", "/gateway/http/")),
    ("JSON-RPC/SDK", ("/mcp/",)),
    ("gateway", ("/gateway/",)),
    ("JSON codec", ("/json/", "_json")),
    ("event loop", ("/asyncio/", "/anyio/", "/sniffio/", "selectors", "<method 'poll'", "<method 'select'")),
]


def layer(filename: str, name: str) -> str:
    """The layer a function's own time belongs to."""
    where = f"{filename} {name}"
    for label, fragments in LAYERS:
        if any(fragment in where for fragment in fragments):
            return label
    return "other"


def by_layer(stats: pstats.Stats, calls: int) -> dict[str, float]:
    """Own CPU per call (microseconds) by layer."""
    totals: dict[str, float] = defaultdict(float)
    for (filename, _line, name), row in stats.stats.items():  # type: ignore[attr-defined]
        if filename != "~" or not row[4]:
            totals[layer(filename, name)] += row[2]
            continue
        # A C builtin (a pydantic validator, json.dumps, epoll) is billed to the layers that called it.
        for (caller_file, _caller_line, caller_name), caller_row in row[4].items():
            totals[layer(caller_file, caller_name)] += caller_row[2]
    return {label: round(seconds / calls * 1e6, 1) for label, seconds in sorted(totals.items(), key=lambda r: -r[1])}


class Profiler:
    """cProfile switched on around a profiled call, and off while the bench's own SDK client checks the answer
    against the tool's outputSchema (jsonschema: the client's work, not the gateway's)."""

    def __init__(self) -> None:
        self.profile = cProfile.Profile(time.thread_time)
        self.on = False

    def enable(self) -> None:
        self.on = True
        self.profile.enable()

    def disable(self) -> None:
        self.profile.disable()
        self.on = False

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Off for the block, if it was on."""
        was = self.on
        if was:
            self.profile.disable()
        try:
            yield
        finally:
            if was:
                self.profile.enable()


@contextmanager
def client_checks_unprofiled(profiler: Profiler) -> Iterator[None]:
    """The SDK client's ``validate_tool_result`` runs with the profiler paused."""
    original = ClientSession.validate_tool_result

    async def validate(session: ClientSession, name: str, result: Any) -> None:
        with profiler.paused():
            await original(session, name, result)

    ClientSession.validate_tool_result = validate  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        ClientSession.validate_tool_result = original  # type: ignore[method-assign]


async def _drive(config_path: Path, kind: str, calls: int, profiler: Profiler) -> int:
    config = load_config(config_path)
    async with open_gateway(config) as gw:
        server = build_server(gw)
        async with Client(server, elicitation_callback=accept) as client:

            async def preview(i: int) -> Any:
                arguments = {"tenantId": DEMO_TARGETS[i % len(DEMO_TARGETS)], "fixture": "empty"}
                return await client.call_tool("preview_tenant_reset", arguments)

            async def read(i: int) -> None:
                result = await client.call_tool("list_tenants", {})
                assert not result.is_error, result.content

            async def write(i: int) -> None:
                plan = await preview(i)
                assert plan.structured_content is not None, plan.content
                arguments = {"planId": plan.structured_content["planId"], "idempotencyKey": f"profile-{kind}-{i}"}
                profiler.enable()
                try:
                    done = await client.call_tool("reset_tenant", arguments)
                finally:
                    profiler.disable()
                assert not done.is_error, done.content

            step: Callable[[int], Awaitable[None]] = read if kind == "read" else write
            await step(-1)  # warm: imports, first connections, first schemas
            for i in range(calls):
                if kind == "read":
                    profiler.enable()
                    try:
                        await step(i)
                    finally:
                        profiler.disable()
                else:
                    await step(i)
    return calls


async def _serve(config_path: Path, protocol: str, calls: int, profiler: Profiler) -> int:
    """A real ``serve`` (uvicorn, the whole app) in this process, read by one wire client in a child process
    (``bench.wire``: its CPU is its own); the profiler runs from the child's "warm" to its "done"."""
    from gateway.cli.serve import serve_http
    from gateway.http.sockets import bound_socket

    sock = bound_socket("127.0.0.1", 0)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(serve_http, load_config(config_path), sock, "127.0.0.1", sock.getsockname()[1])
        for _ in range(600):  # 60 s for the backend to start and the catalog to load
            if await _ready(url):
                break
            await anyio.sleep(0.1)
        else:
            raise RuntimeError(f"{url} did not become healthy")
        command = [sys.executable, "-m", "bench.wire", url, str(calls), protocol]
        async with await anyio.open_process(command, cwd=procs.ROOT) as client:
            assert client.stdout is not None
            seen = b""
            async for chunk in client.stdout:
                seen += chunk
                if b"warm" in seen and not profiler.on:
                    profiler.enable()
                if b"done" in seen:
                    break
            profiler.disable()
            await client.wait()
            if client.returncode != 0 or b"done" not in seen:
                raise RuntimeError(f"the wire client failed ({client.returncode})")
        os.kill(os.getpid(), signal.SIGTERM)  # serve's own way out (uvicorn's lifespan ends without a traceback)
    return calls


async def _ready(url: str) -> bool:
    import httpx

    try:
        async with httpx.AsyncClient() as http:
            return (await http.get(url.replace("/mcp", "/healthz"))).status_code == 200
    except httpx.HTTPError:
        return False


def profile(store: str, calls: int, top: int, shown: str = "other", http: str | None = None) -> dict[str, Any]:
    """Profile ``calls`` reads (list_tenants) and ``calls`` confirmed writes (reset_tenant, both rounds)."""
    found: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-profile-") as tmp, ExitStack() as stack:
        work = Path(tmp)
        url = procs.store_url(store, work, stack, "profile")
        db = work / "profile.db"
        procs.seed_database(db, tenants=None)
        config = procs.gateway_config(work / "profile.toml", db, store=url, tenants=None, state_dir=work / "state")
        for kind in ("read",) if http else ("read", "write"):
            profiler = Profiler()
            with client_checks_unprofiled(profiler):
                run = partial(_serve, config, http, calls) if http else partial(_drive, config, kind, calls)
                done = anyio.run(run, profiler)
            stats = pstats.Stats(profiler.profile)
            total = sum(row[2] for row in stats.stats.values())  # type: ignore[attr-defined]
            layers = by_layer(stats, done)
            found[kind] = {"calls": done, "cpu_us_per_call": round(total / done * 1e6, 1), "layers": layers}
            print(f"\n{kind}: {done} calls, {found[kind]['cpu_us_per_call']} us of profiled CPU per call ({store})")
            print("| layer | us/call | share |\n| --- | ---: | ---: |")
            for label, micros in layers.items():
                print(f"| {label} | {micros} | {micros / found[kind]['cpu_us_per_call']:.0%} |")
            if top:
                others = [
                    (row[2], f"{key[0]}:{key[2]}")
                    for key, row in stats.stats.items()  # type: ignore[attr-defined]
                    if layer(key[0], key[2]) == shown and (key[0] != "~" or not row[4])
                ]
                print(f"\n{shown}, most own time first:")
                for seconds, where in sorted(others, reverse=True)[:top]:
                    print(f"  {seconds / done * 1e6:8.1f} us  {where}")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.profile", description=__doc__.splitlines()[0])
    parser.add_argument("--store", default="sqlite", choices=["sqlite", "memory", "redis", "postgres"])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--top", type=int, default=0, help="also print the N functions with the most own time")
    parser.add_argument("--layer", default="other", help="the layer --top lists (default: other)")
    parser.add_argument(
        "--http",
        choices=["2025-11-25", "2026-07-28"],
        help="profile reads through a real HTTP serve in process, driven over the wire in this era (reads only)",
    )
    args = parser.parse_args(argv)
    profile(args.store, args.calls, args.top, args.layer, args.http)
    return 0


if __name__ == "__main__":
    sys.exit(main())
