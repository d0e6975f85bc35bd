"""Fault-injection soak: many callers reset tenants through real gateways while the backend and the gateways fail.

    .venv/bin/python -m bench.soak [--seconds 30] [--max-calls 3000] [--workers 6] [--replicas 1]
                                   [--store sqlite|memory|redis://HOST:PORT/0|postgres|postgresql://...]

Everything runs on loopback and stops by itself (time and call bounds). The legacy backend runs over HTTP with
fault switches armed (latency, fail-before-write, commit-then-drop, malformed-after-write); when it dies it is
restarted on the same database. Once per run a gateway replica is SIGKILLed mid-write and restarted on the same
store. With ``--store postgres`` the soak starts a PostgreSQL server of its own (tests/support/postgres.py), and
restarts it once mid-run too (an immediate stop, as a crash): ``--replicas 3 --store postgres`` is three
replicas on one database across a database restart and a replica killed mid-write. Each worker owns its
tenants, so the writes each key caused can be counted exactly from the backend's own write_log:

    expected  = keys answered as applied + keys answered outcome_unknown whose tenant did move
    duplicates = writes beyond expected, losses = expected writes that never reached the backend

The run fails (exit 1) unless both are zero.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import sqlite3
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from gateway.config.store_url import is_postgres
from gateway.stores.postgres.schema import migrate
from tests.support.clients import accept
from tests.support.configs import config_data, write_toml
from tests.support.postgres import PostgresServer, fresh_schema, postgres_process
from tests.support.processes import HOST, Proc, backend_args, free_port, serve_args
from tests.support.profiles import TENANTS

FAULTS = "latency=150:20,fail-before-write:4,drop-after-write:3,malformed-after-write:4"


@dataclass
class Tally:
    """What the workers saw. Per tenant: keys answered applied, keys whose outcome stayed unknown."""

    calls: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    applied: Counter[str] = field(default_factory=Counter)
    unknown: Counter[str] = field(default_factory=Counter)
    bad_replays: int = 0
    store_restarts: int = 0


def gateway_config(tmp: Path, backend_port: int, store: str) -> Path:
    """The default tools over the HTTP backend, with the soak's store and no practical rate limit."""
    store_url = f"sqlite:{tmp}/gateway.db" if store == "sqlite" else store
    url = f"http://{HOST}:{backend_port}/mcp"
    backend = {"transport": "http", "url": url, "call_timeout_seconds": 5, "connect_timeout_seconds": 5}
    data = config_data(TENANTS, tmp / "backend.db", store=store_url, state_dir=tmp / "state", backend=backend)
    return write_toml(data, tmp / "soak.toml")


def query(db: Path, sql: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(sql).fetchall()


RETRY_SAME_KEY = {
    "backend_unavailable",
    "store_unavailable",
    "transport_error",
    "request_in_progress",
    "preview_failed",
}


async def attempt(url: str, tenant: str, key: str, state: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """Preview (unless this key already has a plan) and reset once; the outcome code and the answer."""
    http = httpx2.AsyncClient(timeout=30)
    async with Client(streamable_http_client(url, http_client=http), mode="legacy", elicitation_callback=accept) as c:
        if state.get("plan") is None:
            planned = await c.call_tool("preview_tenant_reset", {"tenantId": tenant, "fixture": "smoke"})
            if planned.is_error or planned.structured_content is None:
                return "preview_failed", {}
            state["plan"] = planned.structured_content["planId"]
        result = await c.call_tool("reset_tenant", {"planId": state["plan"], "idempotencyKey": key})
        block = result.content[0] if result.content else None
        body = json.loads(block.text) if isinstance(block, types.TextContent) else {}
        if result.is_error:
            return str(body.get("code", "?")), body
        if not body.get("replayed"):
            for _ in range(20):  # a replay refused for a passing reason (the store restarting) is asked again
                again = await c.call_tool("reset_tenant", {"planId": state["plan"], "idempotencyKey": key})
                if not again.is_error or _code(again) not in RETRY_SAME_KEY:
                    break
                await anyio.sleep(0.3)
            if again.structured_content != {**body, "replayed": True}:
                return "bad_replay", body
        return "applied", body


def _code(result: types.CallToolResult) -> str:
    block = result.content[0] if result.content else None
    return str(json.loads(block.text).get("code", "?")) if isinstance(block, types.TextContent) else "?"


async def worker(number: int, tenants: list[str], urls: list[str], deadline: float, budget: int, tally: Tally) -> None:
    """Reset this worker's own tenants in turn; retry each key until it has an outcome."""
    round_ = 0
    while time.monotonic() < deadline and tally.calls < budget:
        tenant = tenants[round_ % len(tenants)]
        round_ += 1
        key, state = str(uuid.uuid4()), dict[str, Any]()
        for try_ in range(10):
            tally.calls += 1
            try:
                with anyio.fail_after(40):
                    code, _ = await attempt(urls[(number + try_) % len(urls)], tenant, key, state)
            except Exception:
                code = "transport_error"
            tally.outcomes[code] += 1
            if code in RETRY_SAME_KEY and time.monotonic() < deadline + 20:
                await anyio.sleep(0.3)
                continue
            if code in {"applied", "bad_replay"}:
                tally.applied[tenant] += 1
                tally.bad_replays += code == "bad_replay"
            elif code in {"outcome_unknown", "idempotency_key_reused"} or code in RETRY_SAME_KEY:
                tally.unknown[tenant] += 1  # it may have written once; it never may write twice
            break


async def supervise(backend: Proc, until: float) -> None:
    """Restart the backend whenever a fault made it exit (commit-then-drop)."""
    while time.monotonic() < until:
        if not backend.alive():
            await anyio.to_thread.run_sync(backend.start)
        await anyio.sleep(0.1)


async def crash_once(gateway: Proc, at: float) -> None:
    """SIGKILL one gateway replica mid-run and bring it back on the same store."""
    await anyio.sleep(max(0.0, at - time.monotonic()))
    gateway.kill()
    await anyio.to_thread.run_sync(gateway.start)


async def restart_store_once(server: PostgresServer, at: float, tally: Tally) -> None:
    """Stop the database as a crash would, mid-run, and start it again a second later."""
    await anyio.sleep(max(0.0, at - time.monotonic()))
    await anyio.to_thread.run_sync(server.stop, "immediate")
    await anyio.sleep(1.0)
    await anyio.to_thread.run_sync(server.start)
    tally.store_restarts += 1


async def run(args: argparse.Namespace) -> int:
    with contextlib.ExitStack() as stack:
        server = None
        if args.store == "postgres":
            server = stack.enter_context(postgres_process(free_port()))
            args.store = fresh_schema(server.url, timeout="2")
        if is_postgres(args.store):
            await migrate(args.store)
        return await soak(args, server)


async def soak(args: argparse.Namespace, server: PostgresServer | None) -> int:
    tmp = Path(tempfile.mkdtemp(prefix="gateway-soak-"))
    db, backend_port = tmp / "backend.db", free_port()
    seed = ("--seed-tenants", str(args.workers * 2))
    backend_argv = backend_args(TENANTS, db, *seed, port=backend_port)
    backend = Proc(backend_argv, backend_port, tmp / "backend.log", env={"LEGACY_FAULT": FAULTS})
    config = gateway_config(tmp, backend_port, args.store)
    gateways = []
    for number in range(args.replicas):
        port = free_port()
        argv = serve_args(config, port, "--log-level", "warning")
        gateways.append(Proc(argv, port, tmp / f"gateway{number}.log"))
    tally = Tally()
    started = time.monotonic()
    try:
        backend.start()
        for gateway in gateways:
            gateway.start()
        tenants = [row[0] for row in query(db, "SELECT id FROM tenants ORDER BY id")]
        urls = [f"http://{HOST}:{gateway.port}/mcp" for gateway in gateways]
        # The run's seconds count from when everything listens: a loaded machine can take longer than a short
        # run to start the processes, and then no call would be made at all.
        running = time.monotonic()
        deadline = running + args.seconds
        async with anyio.create_task_group() as background:
            background.start_soon(supervise, backend, deadline + 60)
            background.start_soon(crash_once, gateways[-1], running + args.seconds * 0.4)
            if server is not None:
                background.start_soon(restart_store_once, server, running + args.seconds * 0.6, tally)
            async with anyio.create_task_group() as workers:
                for number in range(args.workers):
                    own = tenants[number :: args.workers]
                    workers.start_soon(worker, number, own, urls, deadline, args.max_calls, tally)
            background.cancel_scope.cancel()
        if not backend.alive():
            backend.start()  # so that the final counts read a settled database
        actual = dict(query(db, "SELECT tenant_id, COUNT(*) FROM write_log GROUP BY tenant_id"))
        fires = dict(query(db, "SELECT name, fired FROM fault_fires"))
    finally:
        for process in [*gateways, backend]:
            process.stop()
    duplicates = sum(max(0, actual.get(t, 0) - tally.applied[t] - tally.unknown[t]) for t in tenants)
    losses = sum(max(0, tally.applied[t] - actual.get(t, 0)) for t in tenants)
    applied, unknown = sum(tally.applied.values()), sum(tally.unknown.values())
    report = {
        "seconds": round(time.monotonic() - started, 1),
        "replicas": args.replicas,
        "store": args.store,
        "calls made": tally.calls,
        "outcomes": dict(tally.outcomes),
        "faults injected": {
            **fires,
            "gateway SIGKILL": 1,
            "backend restarts": backend.starts - 1,
            **({"store restarts": tally.store_restarts} if server is not None else {}),
        },
        "writes applied (backend write_log)": sum(actual.values()),
        "writes expected": f"{applied} confirmed + up to {unknown} with outcome_unknown",
        "duplicates": duplicates,
        "losses": losses,
        "bad replays": tally.bad_replays,
        "logs": str(tmp),
    }
    for name, value in report.items():
        print(f"{name:36} {value}")
    return 0 if duplicates == losses == tally.bad_replays == 0 else 1


def main() -> int:
    parser = argparse.ArgumentParser(prog="bench.soak", description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--max-calls", type=int, default=3000)
    parser.add_argument("--workers", type=int, default=6)
    parser.add_argument("--replicas", type=int, default=1)
    parser.add_argument(
        "--store",
        default="sqlite",
        help="sqlite, memory, redis://HOST:PORT/DB, postgres (a server of its own, restarted once), or postgresql://...",
    )
    args = parser.parse_args()
    # Clients whose gateway was killed under them log tracebacks; the report below is what this run says.
    logging.basicConfig(level=logging.CRITICAL)
    if args.replicas > 1 and not args.store.startswith(("redis://", "postgres")):
        parser.error("several replicas need a shared store: --store redis://HOST:PORT/0 or postgres")
    return anyio.run(run, args)


if __name__ == "__main__":
    sys.exit(main())
