"""Mixed load: read latency while 8 callers run confirmed writes, on the SQLite store (the default), where every
claim, settle and audit entry is an fsync.

Two gateway processes side by side, one on the SQLite store and one on the memory store (no store I/O at all:
the floor this machine allows), each with a stdio backend and bulk tenants of its own. Three windows per store
and round, the stores alternating, so that a noisy neighbour hits each alike: *idle* (one lean reader calling
``list_tenants`` closed-loop), *mixed* (the same reader while 8 writers run preview + confirmed
``reset_tenant``) and *writes alone* (the 8 writers without the reader). The writers run in a child process
(``python -m bench.mixed writers URL N S``) so that their SDK clients' CPU is not billed to the reader's
latencies; each writer resets its own tenants, so no two race for a lock. Writes use the 2026-07-28 era (an
``InputRequiredResult`` round, then the retry that applies). ``run(stores=...)`` measures other stores the same
way, each on a server of its own: the bench's ``stores`` section runs SQLite, Redis and PostgreSQL.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from contextlib import AsyncExitStack, ExitStack
from functools import partial
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

from bench import procs
from bench.load import Sample, run_load
from bench.readpath import PAGE_CALL, _call
from bench.writepath import Writer
from tests.support.clients import accept

WRITERS = 8
TENANTS = WRITERS * 16
"""Few tenants: list_tenants reads the backend's whole (unbounded) list, and it should stay a cheap read."""


STORES = ("sqlite", "memory")


def run(work: Path, *, rounds: int, seconds: float, log: Any, stores: tuple[str, ...] = STORES) -> dict[str, Any]:
    """Per store: read latency idle and under write load, and writes per second with and without the reader.
    By default SQLite is the one measured; memory, the same load with no store I/O at all, is the floor the
    machine allows. The gateways run side by side and their windows alternate (the order reversed every round)."""
    read = partial(_call, name=PAGE_CALL[0], arguments=PAGE_CALL[1])
    stores = tuple(store for store in stores if procs.store_available(store) is None)
    totals = {store: _Totals() for store in stores}
    with ExitStack() as stack:
        servers = {store: stack.enter_context(_gateway(work, store, stack)) for store in stores}
        for round_number in range(rounds):
            for store in stores if round_number % 2 == 0 else reversed(stores):
                url, total = servers[store].url, totals[store]
                total.idle.add(anyio.run(_reads, url, read, seconds))
                with _WriterRun(url, seconds) as writer:
                    total.mixed.add(anyio.run(_reads, url, read, seconds))
                total.count("mixed", writer)
                with _WriterRun(url, seconds) as writer:
                    pass
                total.count("alone", writer)
            log(f"  round {round_number + 1}/{rounds} done")
    results = {store: totals[store].summary() for store in stores}
    for store, result in results.items():
        log(
            f"  {store}: read p99 idle {result['idle_read']['p99_ms']} ms, under {WRITERS} writers "
            f"{result['mixed_read']['p99_ms']} ms (x{result['read_p99_ratio']}); median x{result['read_median_ratio']};"
            f" confirmed writes/s at {WRITERS} callers {result['writes_per_s_alone']} alone, "
            f"{result['writes_per_s_with_reader']} beside the reader; errors {result['write_errors']}"
        )
    return results


def _gateway(work: Path, store: str, stack: ExitStack) -> Any:
    """A gateway on its own backend database with ``store`` (its server, if any, stopped by ``stack``), no rate
    limit (one caller runs 8 writers)."""
    db = work / f"mixed-{store}.db"
    procs.seed_database(db, tenants=TENANTS)
    config = procs.gateway_config(  # its per-caller rate limit is unlimited (tests/support/configs.py)
        work / f"mixed-{store}.toml",
        db,
        store=procs.store_url(store, work, stack, f"mixed-{store}"),
        tenants=TENANTS,
        state_dir=work / "state",
    )
    return procs.gateway(config, work, name=f"gateway-mixed-{store}")


class _Totals:
    """One store's pooled windows."""

    def __init__(self) -> None:
        self.idle, self.mixed = Sample(), Sample()
        self.writes = {"mixed": [0, 0.0, 0], "alone": [0, 0.0, 0]}  # ops, seconds, errors
        self.first_error: str | None = None

    def count(self, window: str, writer: _WriterRun) -> None:
        total = self.writes[window]
        total[0] += writer.counts["ops"]
        total[1] += writer.counts["seconds"]
        total[2] += writer.counts["errors"]
        self.first_error = self.first_error or next(iter(writer.counts["first_error"]), None)

    def summary(self) -> dict[str, Any]:
        result: dict[str, Any] = {
            "idle_read": self.idle.summary(),
            "mixed_read": self.mixed.summary(),
            "writes_per_s_with_reader": round(self.writes["mixed"][0] / self.writes["mixed"][1], 1),
            "writes_per_s_alone": round(self.writes["alone"][0] / self.writes["alone"][1], 1),
            "write_errors": self.writes["mixed"][2] + self.writes["alone"][2],
            "first_write_error": self.first_error,
        }
        result["read_p99_ratio"] = round(result["mixed_read"]["p99_ms"] / result["idle_read"]["p99_ms"], 2)
        result["read_median_ratio"] = round(result["mixed_read"]["median_ms"] / result["idle_read"]["median_ms"], 2)
        return result


async def _reads(url: str, read: Any, seconds: float) -> Sample:
    return await run_load(url, read, clients=1, seconds=seconds, max_calls=1_000_000, warmup_calls=5)


class _WriterRun:
    """A writers child process: started and warmed up on entry, its counts read on exit."""

    def __init__(self, url: str, seconds: float) -> None:
        self.args = [procs.PYTHON, "-m", "bench.mixed", "writers", url, str(WRITERS), str(seconds)]
        self.counts: dict[str, Any] = {}

    def __enter__(self) -> _WriterRun:
        self.child = subprocess.Popen(self.args, cwd=procs.ROOT, stdout=subprocess.PIPE, text=True)
        assert self.child.stdout is not None
        if self.child.stdout.readline().strip() != "ready":
            self.child.kill()
            raise RuntimeError("the writers did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        out, _ = self.child.communicate(timeout=300)
        self.counts = json.loads(out)


async def writers_main(url: str, count: int, seconds: float) -> dict[str, Any]:
    """The child: ``count`` SDK writers on disjoint tenants, warmed up, then closed-loop for ``seconds``."""
    per_writer = TENANTS // count
    ops, errors = [0], [0]
    first_error: list[str] = []
    async with AsyncExitStack() as stack:
        writers = [
            Writer(
                await stack.enter_async_context(Client(url, elicitation_callback=accept)),
                range(1 + n * per_writer, 1 + (n + 1) * per_writer),
            )
            for n in range(count)
        ]
        for writer in writers:
            await writer.operation()
        print("ready", flush=True)
        began = time.perf_counter()
        deadline = began + seconds

        async def loop(writer: Writer) -> None:
            while time.perf_counter() < deadline:
                try:
                    await writer.operation()
                    ops[0] += 1
                except Exception as exc:
                    errors[0] += 1
                    first_error[:] = first_error or [f"{type(exc).__name__}: {str(exc)[:300]}"]

        with anyio.fail_after(seconds + 120):
            async with anyio.create_task_group() as tasks:
                for writer in writers:
                    tasks.start_soon(loop, writer)
        wall = time.perf_counter() - began
    return {"ops": ops[0], "seconds": wall, "errors": errors[0], "first_error": first_error}


if __name__ == "__main__" and sys.argv[1:2] == ["writers"]:
    _, _, url, count, seconds = sys.argv
    print(json.dumps(anyio.run(writers_main, url, int(count), float(seconds))), flush=True)
