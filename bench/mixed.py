"""Mixed load: read latency while 8 callers run confirmed writes, on the SQLite store (the default), where every
claim, settle and audit entry is an fsync.

One gateway process (SQLite store, stdio backend with bulk tenants). Three windows per round, interleaved over
rounds so that a noisy neighbour hits each alike: *idle* (one lean reader calling ``list_tenants`` closed-loop),
*mixed* (the same reader while 8 writers run preview + confirmed ``reset_tenant``) and *writes alone* (the 8
writers without the reader). The writers run in a child process (``python -m bench.mixed writers URL N S``) so
that their SDK clients' CPU is not billed to the reader's latencies; each writer resets its own tenants, so no two
race for a lock. Writes use the 2026-07-28 era (an ``InputRequiredResult`` round, then the retry that applies).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from contextlib import AsyncExitStack
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


def run(work: Path, *, rounds: int, seconds: float, log: Any) -> dict[str, Any]:
    """Read latency idle and under write load, and writes per second with and without the reader."""
    db = work / "mixed.db"
    procs.seed_database(db, tenants=TENANTS)
    config = procs.gateway_config(
        work / "mixed.toml", db, store=f"sqlite:{work}/mixed-store.db", tenants=TENANTS, state_dir=work / "state"
    )
    # TOML has no null, so the default per-caller limit (20 calls/s) would refuse one caller's 8 writers.
    with config.open("a") as toml:
        toml.write("\n[rate_limits.per_caller]\nper_second = 1000000\nburst = 1000000\n")
    idle, mixed = Sample(), Sample()
    writes = {"mixed": [0, 0.0, 0], "alone": [0, 0.0, 0]}  # ops, seconds, errors
    read = partial(_call, name=PAGE_CALL[0], arguments=PAGE_CALL[1])
    with procs.gateway(config, work, name="gateway-mixed") as server:
        for round_number in range(rounds):
            idle.add(anyio.run(_reads, server.url, read, seconds))
            with _WriterRun(server.url, seconds) as writer:
                mixed.add(anyio.run(_reads, server.url, read, seconds))
            _count(writes["mixed"], writer)
            with _WriterRun(server.url, seconds) as writer:
                pass
            _count(writes["alone"], writer)
            log(f"  round {round_number + 1}/{rounds} done {writer.counts.get('first_error') or ''}")
    result: dict[str, Any] = {
        "idle_read": idle.summary(),
        "mixed_read": mixed.summary(),
        "writes_per_s_with_reader": round(writes["mixed"][0] / writes["mixed"][1], 1),
        "writes_per_s_alone": round(writes["alone"][0] / writes["alone"][1], 1),
        "write_errors": writes["mixed"][2] + writes["alone"][2],
    }
    result["read_p99_ratio"] = round(result["mixed_read"]["p99_ms"] / result["idle_read"]["p99_ms"], 2)
    result["read_median_ratio"] = round(result["mixed_read"]["median_ms"] / result["idle_read"]["median_ms"], 2)
    log(
        f"  read p99 idle {result['idle_read']['p99_ms']} ms, under {WRITERS} writers {result['mixed_read']['p99_ms']}"
        f" ms (x{result['read_p99_ratio']}); median x{result['read_median_ratio']}; confirmed writes/s at {WRITERS}"
        f" callers {result['writes_per_s_alone']} alone, {result['writes_per_s_with_reader']} beside the reader;"
        f" errors {result['write_errors']}"
    )
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


def _count(total: list[Any], writer: _WriterRun) -> None:
    total[0] += writer.counts["ops"]
    total[1] += writer.counts["seconds"]
    total[2] += writer.counts["errors"]


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
