"""Choosing the PostgreSQL driver: psycopg 3 with psycopg-pool against asyncpg with its pool, in one run.

    bench/.venv-tools/bin/python bench/pgdriver.py [--seconds 2]     (bench/run installs both drivers there)

Both drive the same throwaway server (fsync on, started as tests/support/postgres.py starts it) with the two
shapes of work the store does: a read by primary key (``get_record``, ``get_plan``) and a claim-shaped
transaction (lock a row, insert, update, commit: ``claim`` and ``settle``), at 1 and 8 concurrent callers, each
on a pool of 8 connections. psycopg runs twice: bare, and with the pool checking every connection before handing
it out (``check_connection``: one more round trip; the store checks only connections idle for a second, which
is what a server restart leaves behind). It prints operations per second and p50/p99 latency per driver, shape
and concurrency.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.postgres import postgres_process

SETUP = "CREATE TABLE IF NOT EXISTS bench (k text PRIMARY KEY, v text NOT NULL, n integer NOT NULL DEFAULT 0)"
POOL = 8
Op = Callable[[int], Awaitable[None]]


async def measure(op: Callable[[int], Awaitable[None]], callers: int, seconds: float) -> dict[str, float]:
    """Run ``op`` from ``callers`` tasks for ``seconds``; operations per second and latency percentiles (ms)."""
    latencies: list[float] = []
    deadline = time.perf_counter() + seconds

    async def caller(n: int) -> None:
        i = 0
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            await op(n * 1_000_000 + i)
            latencies.append(time.perf_counter() - started)
            i += 1

    started = time.perf_counter()
    await asyncio.gather(*(caller(n) for n in range(callers)))
    elapsed = time.perf_counter() - started
    cuts = statistics.quantiles(latencies, n=100)
    return {
        "ops_per_s": round(len(latencies) / elapsed),
        "p50_ms": round(cuts[49] * 1000, 3),
        "p99_ms": round(cuts[98] * 1000, 3),
    }


async def psycopg_ops(
    url: str, checked: bool
) -> tuple[Any, Callable[[int], Awaitable[None]], Callable[[int], Awaitable[None]]]:
    from psycopg_pool import AsyncConnectionPool

    check = AsyncConnectionPool.check_connection if checked else None
    pool = AsyncConnectionPool(url, min_size=POOL, max_size=POOL, kwargs={"autocommit": True}, check=check, open=False)
    await pool.open(wait=True)

    async def read(i: int) -> None:
        async with pool.connection() as conn:
            await (await conn.execute("SELECT v FROM bench WHERE k = %s", [f"k{i % 1000}"])).fetchone()

    async def claim(i: int) -> None:
        key = uuid.uuid4().hex
        async with pool.connection() as conn, conn.transaction():
            await (await conn.execute("SELECT v FROM bench WHERE k = %s FOR UPDATE", [key])).fetchone()
            await conn.execute("INSERT INTO bench (k, v) VALUES (%s, %s) ON CONFLICT (k) DO NOTHING", [key, "x"])
            await conn.execute("UPDATE bench SET n = n + 1 WHERE k = %s", [key])

    return pool, read, claim


async def asyncpg_ops(url: str) -> tuple[Any, Callable[[int], Awaitable[None]], Callable[[int], Awaitable[None]]]:
    import asyncpg

    pool = await asyncpg.create_pool(url, min_size=POOL, max_size=POOL)

    async def read(i: int) -> None:
        async with pool.acquire() as conn:
            await conn.fetchrow("SELECT v FROM bench WHERE k = $1", f"k{i % 1000}")

    async def claim(i: int) -> None:
        key = uuid.uuid4().hex
        async with pool.acquire() as conn, conn.transaction():
            await conn.fetchrow("SELECT v FROM bench WHERE k = $1 FOR UPDATE", key)
            await conn.execute("INSERT INTO bench (k, v) VALUES ($1, $2) ON CONFLICT (k) DO NOTHING", key, "x")
            await conn.execute("UPDATE bench SET n = n + 1 WHERE k = $1", key)

    return pool, read, claim


async def run(url: str, seconds: float) -> dict[str, Any]:
    import psycopg

    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute(SETUP)
        await conn.execute(
            "INSERT INTO bench (k, v) SELECT 'k' || g, 'v' FROM generate_series(0, 999) g ON CONFLICT DO NOTHING"
        )
    results: dict[str, Any] = {}
    drivers: dict[str, Callable[[], Awaitable[tuple[Any, Op, Op]]]] = {
        "psycopg+pool": lambda: psycopg_ops(url, checked=False),
        "psycopg+pool, checked always": lambda: psycopg_ops(url, checked=True),
        "asyncpg+pool": lambda: asyncpg_ops(url),
    }
    for name, make in drivers.items():
        pool, read, claim = await make()
        try:
            for shape, op in (("read", read), ("claim", claim)):
                for callers in (1, 8):
                    results[f"{name} {shape} x{callers}"] = await measure(op, callers, seconds)
        finally:
            await pool.close()
    return results


def main() -> None:
    """Start a server, measure both drivers, print a table and the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="per measurement (default 2)")
    args = parser.parse_args()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    with postgres_process(port) as server:
        results = asyncio.run(run(server.url, args.seconds))
    print(f"{'driver, shape, callers':40} {'ops/s':>8} {'p50 ms':>8} {'p99 ms':>8}")
    for name, figures in results.items():
        print(f"{name:40} {figures['ops_per_s']:>8} {figures['p50_ms']:>8} {figures['p99_ms']:>8}")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
