"""Write path: preview + confirmed reset through a real gateway process, per store.

Each operation is ``preview_tenant_reset`` then ``reset_tenant`` with a fresh idempotency key, by an SDK client
that accepts every prompt: 2025-11-25 (the prompt pushed over the stateful SSE stream) and 2026-07-28 (an
``InputRequiredResult`` round, then the retry that applies). Every client resets its own tenants (bulk tenants,
no rows, fixture ``empty``), so the backend's work per write stays small and no two clients race for a lock.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import AsyncIterator
from contextlib import ExitStack, asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from bench import procs
from bench.load import Sample, run_load
from tests.support.clients import accept

TENANTS = 20_000


class Writer:
    """One SDK client session with its own tenants, and the split of each operation's latency."""

    ranges = itertools.count()

    def __init__(self, client: Client, tenants: range) -> None:
        self.client = client
        self.tenants = itertools.cycle(tenants)
        self.preview = Sample()
        self.reset = Sample()

    async def operation(self) -> None:
        """Preview, then reset with a new key; raise if either is refused."""
        tenant = f"tn_bulk{next(self.tenants):06d}"
        started = time.perf_counter()
        plan = await self.client.call_tool("preview_tenant_reset", {"tenantId": tenant, "fixture": "empty"})
        if plan.is_error or plan.structured_content is None:
            raise RuntimeError(f"preview refused: {plan.content}")
        previewed = time.perf_counter()
        key = f"bench-{time.time_ns()}-{tenant}"
        done = await self.client.call_tool(
            "reset_tenant", {"planId": plan.structured_content["planId"], "idempotencyKey": key}
        )
        if done.is_error or done.structured_content is None or done.structured_content["replayed"]:
            raise RuntimeError(f"reset refused: {done.content}")
        finished = time.perf_counter()
        self.preview.latencies.append(previewed - started)
        self.reset.latencies.append(finished - previewed)


def open_writer(era: str, writers: list[Writer], per_client: int) -> Any:
    """A factory for run_load: an SDK client of the era, holding a disjoint range of tenants."""

    @asynccontextmanager
    async def opened(url: str) -> AsyncIterator[Writer]:
        first = next(Writer.ranges) * per_client + 1
        if era == "2025-11-25":
            client = Client(streamable_http_client(url), mode="legacy", elicitation_callback=accept)
        else:
            client = Client(url, elicitation_callback=accept)
        async with client:
            writer = Writer(client, range(first, first + per_client))
            writers.append(writer)
            yield writer

    return opened


def run(
    work: Path,
    *,
    concurrency: list[int],
    eras: list[str],
    seconds: float,
    max_ops: int,
    log: Any,
    stores: tuple[str, ...] = ("memory", "sqlite", "redis"),
) -> dict[str, Any]:
    """Operations per second and latency for every store (those whose server is installed), era and concurrency."""
    results: dict[str, Any] = {}
    for store_name in stores:
        missing = procs.store_available(store_name)
        if missing is not None:
            log(f"  {store_name} skipped: {missing}")
            continue
        db = work / f"write-{store_name}.db"
        procs.seed_database(db, tenants=TENANTS)
        with ExitStack() as stack:
            store_url = procs.store_url(store_name, work, stack, f"write-{store_name}")
            config = procs.gateway_config(
                work / f"write-{store_name}.toml", db, store=store_url, tenants=TENANTS, state_dir=work / "state"
            )
            server = stack.enter_context(procs.gateway(config, work, name=f"gateway-{store_name}"))
            results[store_name] = {}
            for era in eras:
                for clients in concurrency:
                    writers: list[Writer] = []
                    per_client = TENANTS // max(concurrency)
                    Writer.ranges = itertools.count()
                    load = partial(
                        run_load,
                        server.url,
                        Writer.operation,
                        clients=clients,
                        seconds=seconds,
                        max_calls=max_ops,
                        warmup_calls=2,
                        open_client=open_writer(era, writers, per_client),
                    )
                    sample = anyio.run(load)
                    summary = sample.summary()
                    summary["ops_per_s"] = summary.pop("calls_per_s")
                    summary["ops"] = summary.pop("calls")
                    previews, resets = Sample(), Sample()
                    for writer in writers:
                        previews.add(writer.preview)
                        resets.add(writer.reset)
                    summary["preview_median_ms"] = previews.summary()["median_ms"]
                    summary["reset_median_ms"] = resets.summary()["median_ms"]
                    results[store_name][f"{era} x{clients}"] = summary
                    log(
                        f"  {store_name:>8} {era} x{clients}: {summary['ops_per_s']} ops/s, op median "
                        f"{summary['median_ms']}ms p99 {summary['p99_ms']}ms (preview {summary['preview_median_ms']}"
                        f"ms, confirmed reset {summary['reset_median_ms']}ms), errors {summary['errors']}"
                    )
    return results
