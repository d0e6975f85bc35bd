"""A backend that commits the write and then answers something hostile or broken, and a store that fails while
the write settles: the write is applied once, its key settles, the caller is told what happened (never a
JSON-RPC error), and the audit holds the decision. A real gateway process over a real backend and SQLite files."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.support.clients import ERAS, Answers, applied_body, http_client, new_key, preview
from tests.support.configs import write_config
from tests.support.processes import audit_list, free_port, http_backend, peak_memory_bytes, serve
from tests.support.profiles import TENANTS

pytestmark = pytest.mark.anyio

DB = "backend.db"


def decisions(entries: list[dict[str, Any]], key: str) -> list[tuple[Any, ...]]:
    """The audited (outcome, code, target, version after) of one idempotency key, in order."""
    return [(e["outcome"], e["code"], e["target"], e["version_after"]) for e in entries if e["idempotency_key"] == key]


@pytest.mark.parametrize("era", ERAS)
async def test_an_answer_nested_too_deep_after_the_write_is_applied_once_and_audited(tmp_path: Path, era: str) -> None:
    config, db, port = (
        write_config(TENANTS, tmp_path, "--seed-demo", "--fault", "deep-after-write"),
        tmp_path / DB,
        free_port(),
    )
    async with serve(config, port), http_client(era, f"http://127.0.0.1:{port}/mcp", Answers()) as client:
        plan = await preview(client, TENANTS)
        version = TENANTS.version(db, TENANTS.main)
        args = {"planId": plan["planId"], "idempotencyKey": new_key()}
        first = await client.call_tool(TENANTS.write_tool, args)
        retry = await client.call_tool(TENANTS.write_tool, args)
    assert first.structured_content == applied_body(plan, version + 1), first.content
    assert retry.structured_content == applied_body(plan, version + 1, replayed=True)
    assert TENANTS.write_count(db) == 1
    assert decisions(await audit_list(config), args["idempotencyKey"]) == [
        ("applied", None, TENANTS.main, version + 1),
        ("replayed", None, TENANTS.main, version + 1),
    ]


@asynccontextmanager
async def backend_for(transport: str, tmp_path: Path, *fault: str) -> AsyncIterator[Path]:
    """The gateway's config over a stdio child or a separate HTTP backend process, answering at most 64 KiB."""
    extra: dict[str, Any] = {"max_result_bytes": 65_536}
    if transport == "stdio":
        yield write_config(TENANTS, tmp_path, "--seed-demo", *fault, backend=extra)
        return
    port = free_port()
    async with http_backend(TENANTS, tmp_path / DB, port, "--seed-demo", *fault):
        url = f"http://127.0.0.1:{port}/mcp"
        yield write_config(TENANTS, tmp_path, backend={**extra, "transport": "http", "url": url})


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_an_answer_too_big_after_the_write_is_cut_off_while_reading(tmp_path: Path, transport: str) -> None:
    """64 MiB after the commit, 64 KiB allowed: the gateway stops reading at the cap (its peak memory stays far below
    the answer's size), treats the answer as malformed, reads the version back and reports the write applied."""
    huge = 64 * 1024 * 1024
    db, port = tmp_path / DB, free_port()
    async with (
        backend_for(transport, tmp_path, "--fault", f"huge-after-write={huge}") as config,
        serve(config, port) as gateway,
        http_client("2026-07-28", f"http://127.0.0.1:{port}/mcp", Answers()) as client,
    ):
        plan = await preview(client, TENANTS)
        version = TENANTS.version(db, TENANTS.main)
        before = peak_memory_bytes(gateway.pid)
        args = {"planId": plan["planId"], "idempotencyKey": new_key()}
        with anyio.fail_after(120):
            first = await client.call_tool(TENANTS.write_tool, args)
        grown = peak_memory_bytes(gateway.pid) - before
        retry = await client.call_tool(TENANTS.write_tool, args)
    assert first.structured_content == applied_body(plan, version + 1), first.content
    assert retry.structured_content == applied_body(plan, version + 1, replayed=True)
    assert grown < huge // 4, f"the gateway's peak memory grew by {grown} bytes"
    assert TENANTS.write_count(db) == 1
    assert [d[0] for d in decisions(await audit_list(config), args["idempotencyKey"])] == ["applied", "replayed"]


async def test_a_store_locked_while_the_write_settles_still_tells_the_truth_and_settles_later(tmp_path: Path) -> None:
    """Another process holds the gateway's SQLite file locked from the backend call until the caller has its answer:
    the audit append and the settle both fail. The caller still hears that the write applied (not a JSON-RPC
    error), and once the lock is gone the retry replays it instead of reading request_in_progress forever."""
    config = write_config(TENANTS, tmp_path, "--seed-demo", "--fault", "latency=3000:1")
    db, store, port = tmp_path / DB, tmp_path / "gateway.db", free_port()
    async with serve(config, port), http_client("2026-07-28", f"http://127.0.0.1:{port}/mcp", Answers()) as client:
        plan = await preview(client, TENANTS)
        version = TENANTS.version(db, TENANTS.main)
        args = {"planId": plan["planId"], "idempotencyKey": new_key()}
        answers: list[Any] = []
        answered = anyio.Event()
        with sqlite3.connect(store, isolation_level=None) as holder:
            async with anyio.create_task_group() as tasks:

                async def write() -> None:
                    answers.append(await client.call_tool(TENANTS.write_tool, args))
                    answered.set()

                tasks.start_soon(write)
                with anyio.fail_after(60):  # the backend has the write and sleeps 3 s before committing it
                    while True:
                        if _fault_fires(db, "latency"):
                            break
                        await anyio.sleep(0.02)
                holder.execute("BEGIN IMMEDIATE")
                with anyio.fail_after(120):
                    await answered.wait()
            holder.execute("ROLLBACK")
        retry = await client.call_tool(TENANTS.write_tool, args)
    assert answers[0].structured_content == applied_body(plan, version + 1), answers[0].content
    assert retry.structured_content == applied_body(plan, version + 1, replayed=True), retry.content
    assert TENANTS.write_count(db) == 1
    assert [d[0] for d in decisions(await audit_list(config), args["idempotencyKey"])] == ["applied", "replayed"]


def _fault_fires(db: Path, name: str) -> int:
    with sqlite3.connect(db) as conn:
        row = conn.execute("SELECT fired FROM fault_fires WHERE name = ?", (name,)).fetchone()
    return 0 if row is None else int(row[0])
