"""Gateway memory with N live plans and N idempotency records, through the store API, in a fresh process.

``python -m bench.memory STORE_URL N`` prints JSON. 2N plans shaped like real previews are put; N of them are
claimed under a new key and settled with a result shaped like a real reset (which deletes those plans), so N
plans stay live and N records stay kept. RSS is read before the store is opened and after the last write.

For a file or a database the footprint on disk is measured too: the SQLite file, or for PostgreSQL the size of
each table with its indexes and TOAST (``pg_total_relation_size``) and of the whole database. PostgreSQL is
filled by 8 concurrent tasks (one would take minutes at a commit per operation), with ``synchronous_commit`` off
for the filling session as SQLite's is (the footprint does not depend on when a commit reaches the disk).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

from bench.procs import rss_kib
from gateway.config.store_url import is_postgres
from gateway.records import KeyRecord, Plan
from gateway.stores import open_store
from gateway.stores.postgres.url import parse_url


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
    tasks = 1
    if url.startswith("sqlite:"):
        store = open_store(url)
        # RSS does not depend on fsync; with synchronous=FULL the 400,000 commits would take minutes.
        store._writer.execute("PRAGMA synchronous=OFF")  # type: ignore[attr-defined]
    elif is_postgres(url):
        tasks = 8
        store = open_store(url + "&options=-c%20synchronous_commit%3Doff&pool_max=8")
    else:
        store = open_store(url)
    try:
        now = time.time()

        async def spread(operation: Callable[[int], Awaitable[None]], total: int) -> None:
            async def part(first: int) -> None:
                for i in range(first, total, tasks):
                    await operation(i)

            async with anyio.create_task_group() as group:
                for first in range(tasks):
                    group.start_soon(part, first)

        async def put(i: int) -> None:
            await store.put_plan(_plan(i, now), now)

        async def claim_and_settle(i: int) -> None:
            plan = _plan(count + i, now)
            record = KeyRecord(
                "local", f"bench-key-{i:012d}", plan_id=plan.plan_id, target=plan.target, state="in_flight"
            )
            claim = await store.claim(record, now, 86_400)
            assert claim.claimed, claim
            result = {"planId": plan.plan_id, **plan.arguments, **plan.summary, "version": 2}
            await store.settle(KeyRecord(**{**record.__dict__, "state": "applied", "result": result}))

        started = time.perf_counter()
        await spread(put, 2 * count)
        planned = time.perf_counter()
        await spread(claim_and_settle, count)
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
        "concurrent_tasks": tasks,
        "sampled_live_plans": live,
    }


def main() -> None:
    """Entry point: STORE_URL COUNT."""
    url, count = sys.argv[1], int(sys.argv[2])
    result = anyio.run(fill, url, count)
    if url.startswith("sqlite:"):
        path = Path(url.removeprefix("sqlite:"))
        result["file_mib"] = round(sum(p.stat().st_size for p in path.parent.glob(path.name + "*")) / 2**20, 1)
    if is_postgres(url):
        result.update(postgres_footprint(url, count))
    print(json.dumps(result))


def postgres_footprint(url: str, count: int) -> dict[str, Any]:
    """The PostgreSQL tables' sizes on disk (with indexes and TOAST), after VACUUM ANALYZE, and per live plan."""
    import psycopg

    parsed = parse_url(url)
    with psycopg.connect(parsed.conninfo, autocommit=True) as conn:
        conn.execute("SELECT set_config('search_path', %s, false)", [parsed.schema])
        conn.execute("VACUUM ANALYZE")
        sizes = {
            table: conn.execute("SELECT pg_total_relation_size(%s)", [table]).fetchone()[0]  # type: ignore[index]
            for table in ("plans", "idempotency", "audit")
        }
        database = conn.execute("SELECT pg_database_size(current_database())").fetchone()[0]  # type: ignore[index]
    return {
        "plans_table_mib": round(sizes["plans"] / 2**20, 1),
        "idempotency_table_mib": round(sizes["idempotency"] / 2**20, 1),
        "bytes_per_live_plan": round(sizes["plans"] / count),
        "bytes_per_key_record": round(sizes["idempotency"] / count),
        "database_mib": round(database / 2**20, 1),
    }


if __name__ == "__main__":
    main()
