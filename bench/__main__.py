"""``python -m bench`` (or ``bench/run``): the gateway beside plain pass-through proxies, in one run, on loopback.

Sections (``--only`` picks some): ``read`` (gateway vs direct vs mcp-proxy vs FastMCP's proxy at 1/8/32 clients,
and on Redis ``serve --workers 2`` beside one worker, each with its CPU per call), ``own`` (the
gateway's in-process cost per call), ``write`` (preview + confirmed reset per store), ``mixed`` (read latency
while 8 callers write), ``scale`` (10 / 10,000 / 100,000 tenants), ``memory`` (RSS with 100,000 live plans and
records), ``stores`` (SQLite vs Redis vs PostgreSQL: confirmed writes per second at 1 and 8 callers, read p99
under 8 writers, and 100,000 live plans in PostgreSQL with its footprint; ``--only stores`` runs it alone).
Everything is bounded in time and count and every process started here is stopped on exit. Results:
``OUT/results.json`` and ``OUT/results.png``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import inprocess, mixed, procs, readpath, report, scale, writepath

SECTIONS = ["read", "own", "write", "mixed", "scale", "memory", "stores"]
TOOLS_PYTHON = procs.ROOT / "bench" / ".venv-tools" / "bin" / "python"


def stores(work: Path, *, quick: bool, rounds: int, log: Any) -> dict[str, Any]:
    """SQLite, Redis and PostgreSQL in one run: confirmed writes per second at 1 and 8 callers, read latency under
    8 writers, and (PostgreSQL) the footprint of 100,000 live plans and key records."""
    shared = ("sqlite", "redis", "postgres")
    log("stores side by side: preview + confirmed reset at 1 and 8 callers (2026-07-28):")
    found: dict[str, Any] = {
        "write": writepath.run(
            work,
            concurrency=[1, 8],
            eras=["2026-07-28"],
            seconds=2.0 if quick else 6.0,
            max_ops=5_000,
            log=log,
            stores=shared,
        )
    }
    log(f"stores side by side: read latency while {mixed.WRITERS} callers run confirmed writes:")
    found["mixed"] = mixed.run(work, rounds=rounds, seconds=2.0 if quick else 5.0, log=log, stores=shared)
    if procs.store_available("postgres") is None:
        count = 10_000 if quick else 100_000
        log(f"PostgreSQL with {count:,} live plans and {count:,} key records (store API, fresh process):")
        with procs.postgres_server() as url:
            found["postgres_plans"] = filled(url, count, timeout=1800)
        log(f"  {found['postgres_plans']}")
    return found


def filled(url: str, count: int, *, timeout: float) -> dict[str, Any]:
    """bench.memory's figures for a store filled with ``count`` live plans and key records, in a fresh process."""
    done = subprocess.run(
        [sys.executable, "-m", "bench.memory", url, str(count)],
        cwd=procs.ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=True,
    )
    return dict(json.loads(done.stdout))


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if "model name" in line
        ),
        platform.processor(),
    )
    load = os.getloadavg()
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "python": platform.python_version(),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "loadavg_at_start": [round(x, 2) for x in load],
        "mcp_proxy": _version(procs.PROXY_VENV / "bin" / "python", "mcp-proxy"),
        "mcp_in_proxy": _version(procs.PROXY_VENV / "bin" / "python", "mcp"),
        "mcp_in_gateway": _version(Path(sys.executable), "mcp"),
        "httptools_in_gateway": _version(Path(sys.executable), "httptools"),
        "httptools_in_proxy": _version(procs.PROXY_VENV / "bin" / "python", "httptools"),
    }


def _version(python: Path, package: str) -> str | None:
    if not python.exists():
        return None
    done = subprocess.run(
        [str(python), "-c", f"import importlib.metadata as m; print(m.version({package!r}))"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.stdout.strip() or None


def main(argv: list[str] | None = None) -> int:
    """Run the sections, print as they go, write JSON and the chart."""
    parser = argparse.ArgumentParser(prog="bench", description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--out", type=Path, default=procs.ROOT / "bench" / "out", help="results directory")
    parser.add_argument("--only", default=",".join(SECTIONS), help="comma-separated sections (default: all)")
    parser.add_argument("--quick", action="store_true", help="short windows, small sizes: a smoke run (~2 min)")
    parser.add_argument("--seconds", type=float, default=3.0, help="read-path window per system and round")
    parser.add_argument("--rounds", type=int, default=4, help="interleaved read-path rounds")
    parser.add_argument("--walk-seconds", type=float, default=120.0, help="time bound of a 100,000-tenant walk")
    parser.add_argument("--profile", action="store_true", help="also record py-spy flame graphs of the gateway")
    parser.add_argument(
        "--no-what-if",
        action="store_true",
        help="skip the read-path what-if: the gateway on h11, mcp-proxy's HTTP parser (bench/whatif_h11.py)",
    )
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so that every started process is stopped

    only = [name.strip() for name in args.only.split(",") if name.strip()]
    unknown = set(only) - set(SECTIONS)
    if unknown:
        parser.error(f"unknown sections: {', '.join(sorted(unknown))}")
    if "read" in only and not (procs.PROXY_VENV / "bin" / "mcp-proxy").exists():
        parser.error(f"mcp-proxy is not installed in {procs.PROXY_VENV}: run bench/run, which creates it")
    args.out.mkdir(parents=True, exist_ok=True)
    quick = args.quick
    seconds = 1.0 if quick else args.seconds
    rounds = 1 if quick else args.rounds
    sizes = [10, 1_000, 10_000] if quick else [10, 10_000, 100_000]

    results: dict[str, Any] = {"machine": machine(), "settings": vars(args) | {"out": str(args.out)}}
    print(f"machine: {results['machine']}", flush=True)
    started = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="gateway-bench-"))

    def log(line: str) -> None:
        print(line, flush=True)

    try:
        if "read" in only:
            log(f"read path ({rounds} interleaved rounds of {seconds}s per system):")
            results["read"] = readpath.run(
                work,
                concurrency=[1, 8, 32],
                rounds=rounds,
                seconds=seconds,
                what_if_h11=not args.no_what_if,
                log=log,
            )
            if args.profile:
                results["profiles"] = readpath.profile(work, args.out, seconds=10.0, log=log)
        if "own" in only:
            log("gateway's own in-process cost per call (handler time minus backend time):")
            results["own"] = {}
            for store in ("memory", "sqlite"):
                url = "memory" if store == "memory" else f"sqlite:{work}/own-store.db"
                results["own"][store] = inprocess.run(work, url, store, count=100 if quick else 500, log=log)
        if "write" in only:
            log("write path (preview + confirmed reset):")
            results["write"] = writepath.run(
                work,
                concurrency=[1, 4],
                eras=["2025-11-25", "2026-07-28"],
                seconds=2.0 if quick else 6.0,
                max_ops=5_000,
                log=log,
            )
        if "mixed" in only:
            log(f"mixed load (read latency while {mixed.WRITERS} callers run confirmed writes, SQLite store):")
            results["mixed"] = mixed.run(work, rounds=rounds, seconds=2.0 if quick else 5.0, log=log)
        if "scale" in only:
            log("scale (list page, walk through every tenant, preview):")
            results["scale"] = scale.run(
                work,
                sizes=sizes,
                first_pages=10 if quick else 30,
                previews=20 if quick else 100,
                walk_seconds=20.0 if quick else args.walk_seconds,
                log=log,
            )
        if "memory" in only:
            log("memory with N live plans and N idempotency records (store API, fresh process):")
            results["memory"] = {}
            count = 10_000 if quick else 100_000
            for store in ("memory", "sqlite"):
                url = "memory" if store == "memory" else f"sqlite:{work}/memory-store.db"
                results["memory"][store] = filled(url, count, timeout=600)
                log(f"  {store}: {results['memory'][store]}")
        if "stores" in only:
            results["stores"] = stores(work, quick=quick, rounds=rounds, log=log)
    finally:
        results["seconds"] = round(time.perf_counter() - started, 1)
        shutil.rmtree(work, ignore_errors=True)
        path = args.out / "results.json"
        path.write_text(json.dumps(results, indent=2) + "\n")
        log(f"results: {path} ({results['seconds']}s)")
    (args.out / "results.md").write_text(report.markdown(results))
    log(report.markdown(results))
    if TOOLS_PYTHON.exists():
        subprocess.run(
            [str(TOOLS_PYTHON), str(procs.ROOT / "bench" / "chart.py"), str(path), str(args.out / "results.png")],
            check=False,
            timeout=120,
        )
        log(f"chart: {args.out / 'results.png'}")
    else:
        log(f"chart skipped: no {TOOLS_PYTHON} (bench/run creates it)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
