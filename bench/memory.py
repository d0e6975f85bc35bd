"""Gateway memory with N live plans and N idempotency records, through the store API, in a fresh process.

``python -m bench.memory STORE_URL N`` prints JSON. 2N plans shaped like real previews are put; N of them are
claimed under a new key and settled with a result shaped like a real reset (which deletes those plans), so N
plans stay live and N records stay kept. RSS is read before the store is opened and after the last write.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import anyio

from bench.procs import rss_kib
from gateway.records import KeyRecord, Plan
from gateway.stores import open_store


def _plan(i: int, now: float) -> Plan:
    return Plan(
        plan_id=f"pl_{i:022d}",
        caller="local",
        tool="reset_tenant",
        target=f"tn_bulk{i % 100_000:06d}",
        version=1,
        arguments={"tenantId": f"tn_bulk{i % 100_000:06d}", "fixture": "empty"},
        summary={"rowsDeleted": 812, "rowsInserted": 0},
        expires_at=now + 600,
    )


async def fill(url: str, count: int) -> dict[str, Any]:
    """Put the plans and records; return RSS and timings."""
    before = rss_kib(os.getpid())
    store = open_store(url)
    if url.startswith("sqlite:"):
        # RSS does not depend on fsync; with synchronous=FULL the 400,000 commits would take minutes.
        store._writer.execute("PRAGMA synchronous=OFF")  # type: ignore[attr-defined]
    try:
        now = time.time()
        started = time.perf_counter()
        for i in range(2 * count):
            await store.put_plan(_plan(i, now), now)
        planned = time.perf_counter()
        for i in range(count):
            plan = _plan(count + i, now)
            record = KeyRecord(
                "local", f"bench-key-{i:012d}", plan_id=plan.plan_id, target=plan.target, state="in_flight"
            )
            claim = await store.claim(record, now, 86_400)
            assert claim.claimed, claim
            result = {"planId": plan.plan_id, **plan.arguments, **plan.summary, "version": 2}
            await store.settle(KeyRecord(**{**record.__dict__, "state": "applied", "result": result}))
        recorded = time.perf_counter()
        live = 0
        for i in range(0, count, max(1, count // 100)):  # the first half stayed live; sample it
            live += isinstance(await store.get_plan(f"pl_{i:022d}", now), Plan)
        after = rss_kib(os.getpid())
    finally:
        await store.close()
    return {
        "store": url.split(":")[0],
        "plans_live": count,
        "records": count,
        "rss_before_mib": round(before / 1024, 1),
        "rss_after_mib": round(after / 1024, 1),
        "rss_growth_mib": round((after - before) / 1024, 1),
        "put_plan_us": round(1e6 * (planned - started) / (2 * count), 1),
        "claim_settle_us": round(1e6 * (recorded - planned) / count, 1),
        "sampled_live_plans": live,
    }


def main() -> None:
    """Entry point: STORE_URL COUNT."""
    url, count = sys.argv[1], int(sys.argv[2])
    result = anyio.run(fill, url, count)
    if url.startswith("sqlite:"):
        path = Path(url.removeprefix("sqlite:"))
        result["file_mib"] = round(sum(p.stat().st_size for p in path.parent.glob(path.name + "*")) / 2**20, 1)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
