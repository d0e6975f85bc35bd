"""The gateway's own cost per call, in process: time inside its ``tools/call`` handler minus time awaiting the backend.

A real gateway (real backend child over stdio, real store) is driven by an in-memory SDK client. Two clocks run:
one around the handler the gateway registers with the SDK, one around every backend call. What is left is the
gateway's own work (validation, store round trips, planning, JSON), without the MCP hops on either side. A
second figure also counts the SDK's per-request middleware the gateway installs (requestState sealing) and the
SDK's params validation. Writes use the 2026-07-28 path so that no user prompt is awaited inside the handler:
a confirmed write is the two ``reset_tenant`` rounds (ask, then apply).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

from bench import procs
from bench.load import percentile
from gateway.config import load_config
from gateway.mcp.server import build_server
from gateway.runtime import Gateway, open_gateway
from tests.support.clients import accept

# The demo tenants that may be planned (tn_prod_eu is protected). Resetting them to "empty" leaves 0 rows, so
# after the first round the backend's share of a write is a version bump.
DEMO_TARGETS = ["tn_checkout01", "tn_search02", "tn_billing03", "tn_load04"]


@dataclass
class Clocks:
    """Seconds spent in the handler, around it, and awaiting the backend, for the current call."""

    handler: float = 0.0
    around: float = 0.0
    backend: float = 0.0
    backend_calls: int = 0
    log: list[dict[str, float]] = field(default_factory=list)

    def take(self) -> dict[str, float]:
        """This call's own cost (ms), and reset for the next call."""
        own = {
            "own_ms": (self.handler - self.backend) * 1000,
            "own_with_sdk_ms": (self.around - self.backend) * 1000,
            "backend_ms": self.backend * 1000,
            "backend_calls": self.backend_calls,
        }
        self.handler = self.around = self.backend = 0.0
        self.backend_calls = 0
        return own


def instrument(gw: Gateway, server: Any, clocks: Clocks) -> None:
    """Put the clocks around the handler, the gateway's middleware, and the backend client."""
    real_call = gw.backends["default"].call

    async def timed_call(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return await real_call(*args, **kwargs)
        finally:
            clocks.backend += time.perf_counter() - started
            clocks.backend_calls += 1

    gw.backends["default"].call = timed_call  # type: ignore[method-assign]

    entry = server._request_handlers["tools/call"]
    real_handler = entry.handler

    async def timed_handler(ctx: Any, params: Any) -> Any:
        started = time.perf_counter()
        try:
            return await real_handler(ctx, params)
        finally:
            clocks.handler += time.perf_counter() - started

    server._request_handlers["tools/call"] = replace(entry, handler=timed_handler)

    async def around(ctx: Any, call_next: Callable[[Any], Awaitable[Any]]) -> Any:
        if ctx.method != "tools/call":
            return await call_next(ctx)
        started = time.perf_counter()
        try:
            return await call_next(ctx)
        finally:
            clocks.around += time.perf_counter() - started

    # Outermost after the SDK's own tracing middleware: it sees the gateway's requestState boundary.
    server.middleware.insert(1, around)


def summarize(rows: list[dict[str, float]]) -> dict[str, Any]:
    """Median and p99 of each clock over the calls."""
    out: dict[str, Any] = {"calls": len(rows)}
    for name in ("own_ms", "own_with_sdk_ms", "backend_ms"):
        ordered = sorted(row[name] for row in rows)
        out[name] = {"median": round(statistics.median(ordered), 3), "p99": round(percentile(ordered, 0.99), 3)}
    out["backend_calls_per_call"] = round(sum(row["backend_calls"] for row in rows) / max(1, len(rows)), 2)
    return out


async def measure(config_path: Path, *, tenants: list[str], count: int, seconds: float) -> dict[str, Any]:
    """Own cost of list_tenants, preview_tenant_reset and a confirmed reset_tenant, each over many calls."""
    config = load_config(config_path)
    clocks = Clocks()
    results: dict[str, Any] = {}
    async with open_gateway(config) as gw:
        server = build_server(gw)
        instrument(gw, server, clocks)
        async with Client(server, elicitation_callback=accept) as client:
            await client.call_tool("list_tenants", {})
            clocks.take()
            rows = await _repeat(count, seconds, clocks, lambda i: client.call_tool("list_tenants", {}))
            results["list_tenants"] = summarize(rows)

            def preview(i: int) -> Awaitable[Any]:
                arguments = {"tenantId": tenants[i % len(tenants)], "fixture": "empty"}
                return client.call_tool("preview_tenant_reset", arguments)

            rows = await _repeat(count, seconds, clocks, preview)
            results["preview_tenant_reset"] = summarize(rows)

            write_rows: list[dict[str, float]] = []
            deadline = time.perf_counter() + seconds
            for i in range(count):
                if time.perf_counter() > deadline:
                    break
                plan = await preview(i)
                assert plan.structured_content is not None, plan.content
                clocks.take()
                arguments = {"planId": plan.structured_content["planId"], "idempotencyKey": f"bench-{time.time_ns()}"}
                done = await client.call_tool("reset_tenant", arguments)
                assert done.structured_content is not None and not done.is_error, done.content
                write_rows.append(clocks.take())
            results["reset_tenant_confirmed"] = summarize(write_rows)
    return results


def run(work: Path, store_url: str, label: str, *, count: int, log: Any) -> dict[str, Any]:
    """Reads over the demo data set (5 tenants, as on the read path); previews and writes over bulk tenants."""
    db = work / f"own-{label}.db"
    procs.seed_database(db, tenants=None)
    config = procs.gateway_config(
        work / f"own-{label}.toml", db, store=store_url, tenants=None, state_dir=work / "state"
    )
    reads = anyio.run(partial(measure, config, tenants=DEMO_TARGETS, count=count, seconds=60.0))
    for name, figures in reads.items():
        log(
            f"  {label:>6} {name}: own {figures['own_ms']['median']}ms (p99 {figures['own_ms']['p99']}ms), "
            f"with the SDK's middleware {figures['own_with_sdk_ms']['median']}ms; backend awaited "
            f"{figures['backend_ms']['median']}ms in {figures['backend_calls_per_call']} calls"
        )
    return reads


async def _repeat(
    count: int, seconds: float, clocks: Clocks, call: Callable[[int], Awaitable[Any]]
) -> list[dict[str, float]]:
    rows = []
    deadline = time.perf_counter() + seconds
    for i in range(count):
        if time.perf_counter() > deadline:
            break
        result = await call(i)
        assert not result.is_error, result.content
        rows.append(clocks.take())
    return rows
