"""``python -m bench.workers``: read calls/s of ``serve --workers 2`` beside one worker, both on one real Redis.

Both gateways serve the same demo data (each its own backend children over stdio), and ``list_tenants {}`` is
called by closed-loop wire clients (one keep-alive connection each, so a 2025 session stays on one worker). The
windows are interleaved, the order rotated every round; the figure is the median of the per-round ratios. The
machine's load average is printed beside it.

    python -m bench.workers [--clients 32] [--rounds 4] [--seconds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from contextlib import ExitStack
from functools import partial
from pathlib import Path

import anyio

from bench import procs
from bench.load import run_load
from bench.readpath import PAGE_CALL, _call


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.workers", description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args(argv)
    print(f"load average at the start: {os.getloadavg()}")
    with tempfile.TemporaryDirectory(prefix="bench-workers-") as tmp, ExitStack() as stack:
        work = Path(tmp)
        store = procs.store_url("redis", work, stack, "workers")
        db = work / "workers.db"
        procs.seed_database(db, tenants=None)
        config = procs.gateway_config(work / "workers.toml", db, store=store, tenants=None, state_dir=work / "state")
        servers = {n: stack.enter_context(procs.gateway(config, work, name=f"gateway-w{n}", workers=n)) for n in (1, 2)}
        rates: dict[int, list[float]] = {1: [], 2: []}
        call = partial(_call, name=PAGE_CALL[0], arguments=PAGE_CALL[1])
        for round_ in range(args.rounds):
            for n in (1, 2) if round_ % 2 == 0 else (2, 1):
                sample = anyio.run(
                    partial(
                        run_load,
                        servers[n].url,
                        lambda client: call(client),
                        clients=args.clients,
                        seconds=args.seconds,
                        max_calls=200_000,
                    )
                )
                assert sample.errors == 0, sample.errors
                rates[n].append(len(sample.latencies) / sample.wall)
            print(f"  round {round_}: 1 worker {rates[1][-1]:.0f}/s, 2 workers {rates[2][-1]:.0f}/s")
        ratio = statistics.median(b / a for a, b in zip(rates[1], rates[2], strict=True))
        print(
            f"read calls/s at {args.clients} clients on Redis: 2 workers / 1 worker = {ratio:.2f}x "
            f"(1 worker median {statistics.median(rates[1]):.0f}/s); load average at the end: {os.getloadavg()}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
