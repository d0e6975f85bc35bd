"""Scale: a ``list_tenants`` page and a preview with 10, 10,000 and 100,000 tenants in the backend.

For each size: the latency of a fresh first page (it re-reads the backend's unbounded list), of a walk that
follows ``nextCursor`` through every tenant (bounded in time; the report says when it was cut short), and of a
preview; then the gateway's resident memory (gateway + backend child) after the walk.
"""

from __future__ import annotations

import random
import statistics
import time
from functools import partial
from pathlib import Path
from typing import Any

import anyio

from bench import procs
from bench.load import percentile
from bench.wire import WireClient, tool_text

PAGE = 50


async def _timed(client: WireClient, name: str, arguments: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    started = time.perf_counter()
    result = await client.call_tool(name, arguments)
    elapsed = time.perf_counter() - started
    if result.get("isError"):
        raise RuntimeError(f"{name}: {tool_text(result)[:200]}")
    return elapsed, result["structuredContent"]


def _stats(latencies: list[float]) -> dict[str, Any]:
    ordered = sorted(latencies)
    if not ordered:
        return {"count": 0, "median_ms": None, "p99_ms": None}
    return {
        "count": len(ordered),
        "median_ms": round(statistics.median(ordered) * 1000, 3),
        "p99_ms": round(percentile(ordered, 0.99) * 1000, 3),
    }


async def _measure(url: str, tenants: int, *, first_pages: int, previews: int, walk_seconds: float) -> dict[str, Any]:
    out: dict[str, Any] = {}
    async with WireClient(url) as client:
        await _timed(client, "list_tenants", {"limit": PAGE})  # spawns the backend child, loads the catalog
        firsts = []
        deadline = time.perf_counter() + walk_seconds
        for _ in range(first_pages):
            elapsed, _body = await _timed(client, "list_tenants", {"limit": PAGE})
            firsts.append(elapsed)
            if time.perf_counter() > deadline:
                break
        out["first_page"] = _stats(firsts)

        pages, seen = [], 0
        arguments: dict[str, Any] = {"limit": PAGE}
        started = time.perf_counter()
        deadline = started + walk_seconds
        while True:
            elapsed, body = await _timed(client, "list_tenants", arguments)
            pages.append(elapsed)
            seen += len(body["tenants"])
            if "nextCursor" not in body or time.perf_counter() > deadline:
                break
            arguments = {"limit": PAGE, "cursor": body["nextCursor"]}
        out["walk"] = {
            **_stats(pages),
            "tenants_seen": seen,
            "complete": seen >= tenants,
            "seconds": round(time.perf_counter() - started, 2),
        }

        chooser = random.Random(7)
        times = []
        for _ in range(previews):
            tenant = f"tn_bulk{chooser.randint(1, tenants):06d}"
            elapsed, _body = await _timed(client, "preview_tenant_reset", {"tenantId": tenant, "fixture": "empty"})
            times.append(elapsed)
        out["preview"] = _stats(times)
    return out


def run(
    work: Path, *, sizes: list[int], first_pages: int, previews: int, walk_seconds: float, log: Any
) -> dict[str, Any]:
    """Page, walk and preview latency per backend size."""
    results: dict[str, Any] = {}
    for tenants in sizes:
        db = work / f"scale-{tenants}.db"
        started = time.perf_counter()
        procs.seed_database(db, tenants=tenants)
        seeded = time.perf_counter() - started
        config = procs.gateway_config(
            work / f"scale-{tenants}.toml", db, store="memory", tenants=tenants, state_dir=work / "state"
        )
        with procs.gateway(config, work, name=f"gateway-scale-{tenants}") as server:
            measure = partial(
                _measure, server.url, tenants, first_pages=first_pages, previews=previews, walk_seconds=walk_seconds
            )
            result = anyio.run(measure)
            result["rss_mib"] = {
                "gateway": round(server.rss_mib(children=False), 1),
                "with_backend": round(server.rss_mib(), 1),
            }
        result["seed_seconds"] = round(seeded, 2)
        results[str(tenants)] = result
        walk = result["walk"]
        log(
            f"  {tenants:>6} tenants: first page {result['first_page']['median_ms']}ms, walk median "
            f"{walk['median_ms']}ms p99 {walk['p99_ms']}ms over {walk['count']} pages "
            f"({'complete' if walk['complete'] else 'CUT SHORT'} after {walk['seconds']}s), preview "
            f"{result['preview']['median_ms']}ms, RSS {result['rss_mib']}"
        )
    # The smallest list fits one page: its page latency is the median of its repeated first pages.
    base = results.get(str(min(sizes)), {}).get("first_page", {}).get("median_ms")
    for result in results.values():
        median = result["walk"]["median_ms"]
        result["walk_vs_smallest"] = round(median / base, 3) if base and median else None
    return results
