"""A closed-loop load generator: N clients, each calling again as soon as its last call returned."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from dataclasses import dataclass, field
from typing import Any

import anyio

from bench.wire import WireClient

Call = Callable[[Any], Awaitable[Any]]


@dataclass
class Sample:
    """Latencies (seconds) and errors of one or more timed windows, and their total wall time."""

    latencies: list[float] = field(default_factory=list)
    errors: int = 0
    wall: float = 0.0

    def add(self, other: Sample) -> None:
        """Pool another window into this one."""
        self.latencies += other.latencies
        self.errors += other.errors
        self.wall += other.wall

    def summary(self) -> dict[str, Any]:
        """Median and p99 in ms, calls per second, counts."""
        ordered = sorted(self.latencies)
        return {
            "calls": len(ordered),
            "errors": self.errors,
            "median_ms": round(statistics.median(ordered) * 1000, 3) if ordered else None,
            "p99_ms": round(percentile(ordered, 0.99) * 1000, 3) if ordered else None,
            "calls_per_s": round(len(ordered) / self.wall, 1) if self.wall else None,
        }


def percentile(ordered: list[float], q: float) -> float:
    """The nearest-rank percentile of sorted values."""
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


async def run_load(
    url: str,
    call: Call,
    *,
    clients: int,
    seconds: float,
    max_calls: int,
    warmup_calls: int = 5,
    open_client: Callable[[str], AbstractAsyncContextManager[Any]] = WireClient,
) -> Sample:
    """Open ``clients`` sessions, warm them up, then run them together for ``seconds`` or ``max_calls`` calls.

    ``call(session)`` is one timed operation; it raises on a failed call (counted as an error).
    """
    sample = Sample()
    async with AsyncExitStack() as stack:
        sessions = [await stack.enter_async_context(open_client(url)) for _ in range(clients)]
        for session in sessions:
            for _ in range(warmup_calls):
                await call(session)
        deadline = time.perf_counter() + seconds
        budget = [max_calls]

        async def worker(session: Any) -> None:
            while budget[0] > 0 and time.perf_counter() < deadline:
                budget[0] -= 1
                started = time.perf_counter()
                try:
                    await call(session)
                except Exception:
                    sample.errors += 1
                    continue
                sample.latencies.append(time.perf_counter() - started)

        began = time.perf_counter()
        with anyio.fail_after(seconds + 120):
            async with anyio.create_task_group() as tasks:
                for session in sessions:
                    tasks.start_soon(worker, session)
        sample.wall = time.perf_counter() - began
    return sample
