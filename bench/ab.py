"""``python -m bench.ab REV``: this checkout's gateway beside the gateway at git revision REV, one read at a time.

Both run ``serve`` with the bench's config (the demo data, a stdio backend child each, a SQLite store or with
``--store redis`` a Redis server each, no rate limit; each config written by its own tree's bench/procs.py), each
from its own tree extracted with ``git archive`` into a temporary folder (this checkout's: its tracked files as
they are, uncommitted changes included, through ``git stash create``; untracked files are not in it), on this
checkout's Python and environment: what differs is the gateway's code. Both trees are alike in every other way (a
gateway run from this checkout itself used about 6% less CPU per call than the same code run from an extracted
copy, whatever the cause). A package REV needs and this environment lacks makes REV's
gateway fail to start (its log is printed); one this checkout added is only loaded by the code that imports it.
Each backend child starts in the config's folder, so both gateways run this environment's installed
``legacy_backend``.

One wire client (bench/wire.py, 2026-07-28 or 2025-11-25) calls ``list_tenants {}`` on each gateway in turn:
``--rounds`` rounds of ``--calls`` calls, the order alternated every round, after a warm-up. Per round and gateway:
the gateway process's CPU per call (utime + stime from /proc, its backend child apart), the child's, and the
median latency. The figures are the medians of the per-round ratios this / REV, so a machine that slows for a
while slows both sides of a ratio alike; a ratio of the code with itself shows the harness's noise. Each gateway
process's resident memory after the rounds is printed too.

    python -m bench.ab REV [--era 2026-07-28|2025-11-25] [--store sqlite|redis] [--rounds 6] [--calls 600]
                           [--json FILE]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from bench import procs
from bench.wire import PROTOCOL, STATELESS, WireClient
from tests.support.processes import PYTHON, ROOT, Proc, free_port

CALL: tuple[str, dict[str, Any]] = ("list_tenants", {})
WARM_UP = 200
SIDES = ("this", "rev")


@dataclass(frozen=True)
class Sample:
    """One round on one gateway: CPU per call of the gateway and of its backend child (ms), median latency (ms)."""

    server_ms: float
    child_ms: float
    latency_ms: float


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ab", description=__doc__.splitlines()[0])
    parser.add_argument("rev", help="the git revision to compare this checkout with (a commit, tag or branch)")
    parser.add_argument("--era", choices=[STATELESS, PROTOCOL], default=STATELESS, help="the clients' protocol")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--calls", type=int, default=600, help="calls per round and gateway")
    parser.add_argument("--store", choices=["sqlite", "redis"], default="sqlite", help="each gateway's own store")
    parser.add_argument("--json", type=Path, help="also write the rounds and the medians to this file")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.calls < 1:
        parser.error("--rounds and --calls take 1 or more")
    commit = _commit(args.rev)
    this = _snapshot()
    print(f"this checkout ({this[:12]}: HEAD and its uncommitted changes) / {args.rev} ({commit[:12]}), {args.era}")
    print(f"load average at the start: {os.getloadavg()}")
    with tempfile.TemporaryDirectory(prefix="bench-ab-") as tmp, ExitStack() as stack:
        work = Path(tmp)
        trees = {"this": _extract(this, work / "this-tree"), "rev": _extract(commit, work / "rev")}
        stores = {side: procs.store_url(args.store, work, stack, side) for side in SIDES}
        servers = {side: stack.enter_context(_gateway(side, trees[side], work, stores[side])) for side in SIDES}
        rounds = anyio.run(_rounds, servers, args.era, args.rounds, args.calls)
        rss = {side: round(servers[side].rss_mib(children=False), 1) for side in SIDES}
    summary = _summary(rounds)
    for number, each in enumerate(rounds):
        print(f"  round {number}: " + " | ".join(f"{side} {_brief(each[side])}" for side in SIDES))
    print(
        f"this / {args.rev}: gateway CPU per call {summary['server']:.3f}x, median latency {summary['latency']:.3f}x"
        f" (backend child's CPU per call {summary['child']:.3f}x)"
    )
    print(
        f"resident memory of the gateway process after the rounds: this {rss['this']} MiB, {args.rev} {rss['rev']} MiB"
    )
    print(f"load average at the end: {os.getloadavg()}")
    if args.json is not None:
        found = {"rev": args.rev, "commit": commit, "this": this, "era": args.era, "store": args.store}
        found["calls"] = args.calls
        found |= {"ratios": summary, "rss_mib": rss}
        found["rounds"] = [{side: vars(each[side]) for side in SIDES} for each in rounds]
        args.json.write_text(json.dumps(found, indent=2) + "\n")
    return 0


def _commit(rev: str) -> str:
    done = subprocess.run(
        ["git", "rev-parse", "--verify", f"{rev}^{{commit}}"], cwd=ROOT, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(f"python -m bench.ab: {rev!r} is not a commit of this repository: {done.stderr.strip()}")
    return done.stdout.strip()


def _snapshot() -> str:
    """A commit of this checkout's tracked files as they are (``git stash create``; HEAD when nothing changed)."""
    done = subprocess.run(["git", "stash", "create"], cwd=ROOT, capture_output=True, text=True, check=True)
    return done.stdout.strip() or _commit("HEAD")


def _extract(commit: str, into: Path) -> Path:
    """The tree of ``commit``, written out under ``into``."""
    archive = subprocess.run(["git", "archive", "--format=tar", commit], cwd=ROOT, capture_output=True, check=True)
    into.mkdir()
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(into, filter="data")
    return into


@contextmanager
def _gateway(side: str, tree: Path, work: Path, store: str) -> Iterator[procs.Server]:
    """``serve`` from ``tree`` (its ``gateway`` package first on the path: the command runs in that folder)."""
    folder = work / side
    folder.mkdir(exist_ok=True)
    config = _config(tree, folder, store)
    port = free_port()
    args = [PYTHON, "-m", "gateway", "serve", "--config", str(config), "--port", str(port), "--log-level", "warning"]
    proc = Proc(args, port, folder / "serve.log", cwd=tree)
    try:
        proc.start()
    except Exception:
        print(f"{side} ({tree}) did not start; its log:\n{proc.log.read_text()}", file=sys.stderr)
        raise
    try:
        yield procs.Server(side, proc)
    finally:
        proc.stop()


def _config(tree: Path, folder: Path, store: str) -> Path:
    """The bench's config as ``tree``'s own bench/procs.py writes it (a config key a later tree added would stop an
    earlier gateway), over a demo database seeded in ``folder``."""
    script = (
        "import sys; from pathlib import Path; from bench import procs; folder = Path(sys.argv[1]);"
        " procs.seed_database(folder / 'backend.db', tenants=None);"
        " procs.gateway_config(folder / 'gateway.toml', folder / 'backend.db', store=sys.argv[2],"
        " tenants=None, state_dir=folder / 'state')"
    )
    subprocess.run([PYTHON, "-c", script, str(folder), store], cwd=tree, check=True)
    return folder / "gateway.toml"


async def _rounds(servers: dict[str, procs.Server], era: str, rounds: int, calls: int) -> list[dict[str, Sample]]:
    async with (
        WireClient(servers["this"].url, protocol=era) as this,
        WireClient(servers["rev"].url, protocol=era) as rev,
    ):
        clients = {"this": this, "rev": rev}
        for side in SIDES:
            await _median_latency(clients[side], WARM_UP)
        found: list[dict[str, Sample]] = []
        for number in range(rounds):
            each: dict[str, Sample] = {}
            for side in SIDES if number % 2 == 0 else SIDES[::-1]:
                each[side] = await _sample(clients[side], servers[side], calls)
            found.append(each)
        return found


async def _sample(client: WireClient, server: procs.Server, calls: int) -> Sample:
    before = server.cpu_seconds()
    latency = await _median_latency(client, calls)
    after = server.cpu_seconds()
    per_call = 1000 / calls
    return Sample(
        (after["server"] - before["server"]) * per_call,
        (after["children"] - before["children"]) * per_call,
        latency * 1000,
    )


async def _median_latency(client: WireClient, calls: int) -> float:
    latencies = []
    for _ in range(calls):
        started = time.perf_counter()
        result = await client.call_tool(*CALL)
        latencies.append(time.perf_counter() - started)
        if result.get("isError"):
            raise RuntimeError(f"{CALL[0]} failed: {result}")
    return statistics.median(latencies)


def _summary(rounds: list[dict[str, Sample]]) -> dict[str, float]:
    """The medians of the per-round ratios this / rev."""

    def ratio(field: str) -> float:
        pairs = [(float(getattr(each["this"], field)), float(getattr(each["rev"], field))) for each in rounds]
        if any(rev <= 0 for _, rev in pairs):
            raise SystemExit(f"python -m bench.ab: a round measured no {field} for REV; give more --calls")
        return statistics.median(this / rev for this, rev in pairs)

    return {"server": ratio("server_ms"), "child": ratio("child_ms"), "latency": ratio("latency_ms")}


def _brief(sample: Sample) -> str:
    return f"CPU {sample.server_ms:.3f} ms (+{sample.child_ms:.3f}), median {sample.latency_ms:.3f} ms"


if __name__ == "__main__":
    sys.exit(main())
