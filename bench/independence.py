"""Independent backends: the healthy backend's reads keep their latency while another hangs and a third dies.

    .venv/bin/python -m bench.independence [--seconds 6] [--rounds 3]

Two gateways side by side on loopback, each over three backends of its own over streamable HTTP: ``tenants``
(the demo backend; its ``list_tenants`` is the read measured), ``flags`` and ``notes`` (tests/hostile_backend,
one tool passed through as ``read_note``). In the *healthy* gateway all three answer. In the *degraded* one,
``notes`` never answers a ``tools/list`` (``--hang-list``) and ``flags`` is killed a third into each window and
restarted at two thirds. In each window one lean reader calls ``list_tenants`` closed-loop (bench.load), and
beside it a prober calls the sick backends' tools (``read_note``, ``list_flags``) and records how long each call
took, in both gateways alike. Windows alternate between the gateways in every round, so that a noisy neighbour
hits both; the medians come from the pooled windows of one run.

It prints the two medians, their ratio (degraded / healthy) and the longest prober call, and exits 1 unless the
ratio is at most 2 and no call took longer than its backend's timeouts allow (connect, list and call, a ping and
a margin: tests/system/test_independence.py uses the same bound).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from functools import partial
from pathlib import Path
from typing import Any

import anyio

from bench.load import Sample, run_load
from bench.readpath import PAGE_CALL, _call
from bench.wire import WireClient
from gateway.backend.client import PROBE_SECONDS
from tests.support.configs import SICK_TIMEOUTS, three_backends_data, write_toml
from tests.support.processes import Proc, backend_args, free_port, hostile_args, serve_args
from tests.support.profiles import FLAGS, TENANTS

MAX_RATIO = 2.0
SICK_BOUND = sum(SICK_TIMEOUTS.values()) + PROBE_SECONDS + 2
PROBES: list[tuple[str, dict[str, Any]]] = [("read_note", {"id": "n1"}), (FLAGS.list_tool, {})]


def distinct_port(taken: set[int]) -> int:
    """A free port no other process of this run was given (free_port alone may hand out one twice, since
    nothing holds a port between its choice and its process's start)."""
    while (port := free_port()) in taken:
        pass
    taken.add(port)
    return port


class Setup:
    """One gateway over its own three backends (processes), ``sick`` or not."""

    def __init__(self, work: Path, name: str, taken: set[int], *, sick: bool) -> None:
        self.sick = sick
        folder = work / name
        folder.mkdir()
        ports = {name: distinct_port(taken) for name in ("tenants", "flags", "notes")}
        self.port = distinct_port(taken)
        config = write_toml(three_backends_data(folder / "tenants.db", ports, state_dir=folder), folder / "gw.toml")
        notes = hostile_args(ports["notes"], folder / "heard.jsonl", *(["--hang-list"] if sick else []))
        self.tenants = Proc(backend_args(TENANTS, folder / "tenants.db", *TENANTS.seed_demo, port=ports["tenants"]),
                            ports["tenants"], folder / "tenants.log")  # fmt: skip
        self.flags = Proc(backend_args(FLAGS, folder / "flags.db", *FLAGS.seed_demo, port=ports["flags"]),
                          ports["flags"], folder / "flags.log")  # fmt: skip
        self.notes = Proc(notes, ports["notes"], folder / "notes.log")
        self.gateway = Proc(serve_args(config, self.port, "--log-level", "error"), self.port, folder / "gateway.log")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def start(self, stack: ExitStack) -> None:
        for proc in (self.tenants, self.flags, self.notes, self.gateway):
            proc.start()
            stack.callback(proc.stop)


async def prober(url: str, until: float, durations: list[float]) -> None:
    """Call the sick backends' tools until ``until``, recording how long each call took (any answer counts)."""
    async with WireClient(url, timeout=SICK_BOUND * 3) as client:
        while time.perf_counter() < until:
            for name, arguments in PROBES:
                started = time.perf_counter()
                await client.call_tool(name, arguments)
                durations.append(time.perf_counter() - started)
            await anyio.sleep(0.2)


async def window(setup: Setup, seconds: float, durations: list[float]) -> Sample:
    """One measured window: the reader, the prober, and for the sick gateway a kill and a restart of flags."""
    read = partial(_call, name=PAGE_CALL[0], arguments=PAGE_CALL[1])
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(prober, setup.url, time.perf_counter() + seconds, durations)
        if setup.sick:
            tasks.start_soon(kill_and_restart, setup.flags, seconds)
        sample = await run_load(setup.url, read, clients=1, seconds=seconds, max_calls=1_000_000)
    return sample


async def kill_and_restart(flags: Proc, seconds: float) -> None:
    await anyio.sleep(seconds / 3)
    await anyio.to_thread.run_sync(flags.kill)
    await anyio.sleep(seconds / 3)
    await anyio.to_thread.run_sync(flags.start)


def run(work: Path, *, seconds: float, rounds: int) -> dict[str, Any]:
    """Interleaved windows over both gateways; medians, their ratio and the longest sick-tool call."""
    taken: set[int] = set()
    setups = {
        "healthy": Setup(work, "healthy", taken, sick=False),
        "degraded": Setup(work, "degraded", taken, sick=True),
    }
    samples = {name: Sample() for name in setups}
    durations: dict[str, list[float]] = {name: [] for name in setups}
    with ExitStack() as stack:
        for setup in setups.values():
            setup.start(stack)
        for number in range(rounds):
            order = list(setups) if number % 2 == 0 else list(reversed(setups))
            for name in order:
                samples[name].add(anyio.run(window, setups[name], seconds, durations[name]))
            print(f"  round {number + 1}/{rounds} done", file=sys.stderr)
    medians = {name: statistics.median(sample.latencies) for name, sample in samples.items()}
    return {
        "read_median_ms": {name: round(median * 1000, 3) for name, median in medians.items()},
        "reads": {name: sample.summary() for name, sample in samples.items()},
        "ratio": round(medians["degraded"] / medians["healthy"], 3),
        "longest_sick_call_s": {name: round(max(found, default=0.0), 3) for name, found in durations.items()},
        "sick_bound_s": SICK_BOUND,
    }


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.independence", description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=6.0, help="length of one measured window")
    parser.add_argument("--rounds", type=int, default=3, help="windows per gateway")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-independence-") as work:
        result = run(Path(work), seconds=args.seconds, rounds=args.rounds)
    print(json.dumps(result, indent=2))
    slow = max(result["longest_sick_call_s"].values()) > SICK_BOUND
    if result["ratio"] > MAX_RATIO or slow:
        print(f"FAIL: ratio {result['ratio']} (at most {MAX_RATIO}); longest sick call {result['longest_sick_call_s']}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
