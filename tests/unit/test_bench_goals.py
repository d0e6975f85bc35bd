"""bench/run's goal lines: the `--workers 2` goal is read beside what this machine's cores allow at most."""

from __future__ import annotations

import os
from typing import Any

from bench import readpath, report


def _system(calls_per_s: float, server: float, children: float, client: float) -> dict[str, Any]:
    cpu = {"server": server, "children": children, "client": client}
    return {"median_ms": 30.0, "p99_ms": 60.0, "calls_per_s": calls_per_s, "cpu_ms_per_call": cpu}


def test_the_workers_goal_is_reported_beside_the_ceiling_of_the_machines_cores() -> None:
    # One worker does 800 calls/s; at two workers a call costs the machine 2.0 ms of CPU in all, so its cores
    # allow cores * 500 calls/s at most.
    level = {
        "gateway": _system(900, 1.0, 0.2, 0.3),
        "gateway-2026": _system(1000, 0.9, 0.2, 0.3),
        "gateway-redis": _system(800, 1.25, 0.25, 0.3),
        "gateway-redis-2w": _system(980, 1.35, 0.35, 0.3),
    }
    ratios = readpath._ratios(level)
    cores = len(os.sched_getaffinity(0))
    ceiling = round(cores * 500 / 800, 3)
    assert ratios["redis 2 workers/1 worker calls_per_s"] == round(980 / 800, 3)
    assert ratios["redis 2 workers/1 worker calls_per_s, this machine's ceiling"] == ceiling
    lines = report.goals({"read": {"levels": {"32": {"ratios": ratios}}}})
    assert f"read, 32 clients: redis 2 workers/1 worker calls_per_s 1.225 (goal >= 1.6; at most {ceiling} on " in (
        "\n".join(lines)
    )
