"""A second legacy god-tool server, shaped differently from the tenant one: the demo behind config/flags.toml.

``manage_flags(op, args)`` keeps feature flags in SQLite. Its results are nested (``{"ok", "data": {...}}``),
its version field is ``meta.rev``, its protection flag is ``meta.locked``, and a missing flag is reported as
"does not exist". The gateway wraps it with config/flags.toml alone; the tests run every safety test against it.

    python -m legacy_backend.flags (--stdio | --http HOST:PORT) --db PATH [--seed-demo] [--seed-flags N] [--fault SPEC]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sqlite3
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp_types import CallToolResult, TextContent

from legacy_backend.faults import DROP_AFTER_WRITE, MALFORMED_AFTER_WRITE, Faults, parse_fault_specs, specs_from_env

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS flags (key TEXT PRIMARY KEY, description TEXT NOT NULL, enabled INTEGER NOT NULL,"
    " rollout INTEGER NOT NULL, rev INTEGER NOT NULL, locked INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS write_log"
    " (id INTEGER PRIMARY KEY AUTOINCREMENT, at TEXT, op TEXT, flag TEXT, detail TEXT)",
    "CREATE TABLE IF NOT EXISTS fault_fires (name TEXT PRIMARY KEY, fired INTEGER NOT NULL)",
)
DEMO = [
    ("checkout.new_ui", "New checkout UI", 1, 50),
    ("search.ranking_v2", "Search ranking v2", 0, 0),
    ("billing.retry", "Billing retries", 1, 100),
    ("load.shedding", "Load shedding", 0, 5),
]
log = logging.getLogger("legacy_backend.flags")


class Flags:
    """The flag table, with the transaction and fault-count API that legacy_backend.faults expects."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(path, isolation_level=None, timeout=10.0)
        self.db.execute("PRAGMA journal_mode=WAL")
        for statement in SCHEMA:
            self.db.execute(statement)

    @contextmanager
    def transaction(self) -> Iterator[None]:
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    def claim_fault(self, name: str, limit: int | None) -> bool:
        row = self.db.execute("SELECT fired FROM fault_fires WHERE name = ?", (name,)).fetchone()
        if limit is not None and row is not None and row[0] >= limit:
            return False
        self.db.execute(
            "INSERT INTO fault_fires (name, fired) VALUES (?, 1) ON CONFLICT (name) DO UPDATE SET fired = fired + 1",
            (name,),
        )
        return True

    def seed(self, demo: bool, bulk: int) -> None:
        if self.db.execute("SELECT COUNT(*) FROM flags").fetchone()[0]:
            return
        rows = [(key, text, on, rollout, 1, 0) for key, text, on, rollout in DEMO] if demo else []
        if demo:
            rows.append(("prod.kill_switch", "Production kill switch", 0, 0, 1, 1))
        rows += [(f"bulk.flag{n:06d}", f"Bulk flag {n}", 0, 0, 1, 0) for n in range(1, bulk + 1)]
        with self.transaction():
            self.db.executemany("INSERT INTO flags VALUES (?, ?, ?, ?, ?, ?)", rows)

    def all(self) -> list[dict[str, Any]]:
        return [_flag(row) for row in self.db.execute("SELECT * FROM flags ORDER BY key DESC")]

    def get(self, key: str) -> dict[str, Any]:
        row = self.db.execute("SELECT * FROM flags WHERE key = ?", (key,)).fetchone()
        if row is None:
            raise LookupError(f"Flag '{key}' does not exist")
        return _flag(row)

    def set_rollout(self, key: str, rollout: int) -> dict[str, Any]:
        self.get(key)
        self.db.execute(
            "UPDATE flags SET rollout = ?, enabled = ?, rev = rev + 1 WHERE key = ?", (rollout, int(rollout > 0), key)
        )
        self.db.execute(
            "INSERT INTO write_log (at, op, flag, detail) VALUES (?, 'set_rollout', ?, ?)",
            (datetime.now(UTC).isoformat(), key, json.dumps({"rollout": rollout})),
        )
        return self.get(key)


def _flag(row: tuple[Any, ...]) -> dict[str, Any]:
    key, description, enabled, rollout, rev, locked = row
    return {
        "key": key,
        "description": description,
        "state": {"enabled": bool(enabled), "rollout": rollout},
        "meta": {"rev": rev, "locked": bool(locked)},
    }


def _text(body: Any, *, is_error: bool = False) -> CallToolResult:
    text = body if isinstance(body, str) else json.dumps(body)
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=is_error)


def build(flags: Flags, faults: Faults) -> MCPServer:
    server: MCPServer = MCPServer("legacy-flag-admin", version="3.1.0")

    async def manage_flags(op: str, args: dict[str, Any] | None = None) -> CallToolResult:
        args = args or {}
        try:
            if op == "flags.list":
                return _text({"ok": True, "data": {"flags": flags.all()}})
            if op == "flags.get":
                return _text({"ok": True, "data": {"flag": flags.get(str(args["key"]))}})
            if op == "flags.presets":
                return _text({"ok": True, "data": {"presets": {"off": 0, "canary": 5, "half": 50, "full": 100}}})
            if op == "flags.set_rollout":
                return await _write(str(args["key"]), int(args["rollout"]))
            return _text(f"Unsupported op {op!r}", is_error=True)
        except (LookupError, KeyError, ValueError, TypeError) as exc:
            return _text(str(exc.args[0]) if exc.args else "bad request", is_error=True)

    async def _write(key: str, rollout: int) -> CallToolResult:
        delay = faults.latency_seconds()
        if delay:
            await asyncio.sleep(delay)
        if faults.fail_before_write():
            return _text("flag store unavailable", is_error=True)
        with flags.transaction():
            flag = flags.set_rollout(key, rollout)
            fired = faults.after_write()
        if fired == DROP_AFTER_WRITE:
            sys.stderr.flush()
            os._exit(1)
        body = json.dumps({"ok": True, "data": {"flag": flag}})
        return _text(body[: len(body) // 2] if fired == MALFORMED_AFTER_WRITE else body)

    server.add_tool(manage_flags, name="manage_flags", description="Flag admin: op + args.", structured_output=False)
    return server


def build_parser() -> argparse.ArgumentParser:
    """The command line: transport, database, seeding, faults."""
    parser = argparse.ArgumentParser(prog="python -m legacy_backend.flags")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--stdio", action="store_true")
    mode.add_argument("--http")
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--seed-demo", action="store_true")
    parser.add_argument("--seed-flags", type=int, default=0)
    parser.add_argument("--fault", action="append", default=[])
    return parser


def server_for(argv: list[str]) -> MCPServer:
    """The server a command line describes, opened and seeded but not running (tests run it in process)."""
    args = build_parser().parse_args(argv)
    flags = Flags(args.db)
    flags.seed(args.seed_demo, args.seed_flags)
    return build(flags, Faults(parse_fault_specs([*specs_from_env(), *args.fault]), flags))  # type: ignore[arg-type]


def main() -> None:
    args = build_parser().parse_args()
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    server = server_for(sys.argv[1:])
    if args.stdio:
        anyio.run(server.run_stdio_async)
        return
    import uvicorn

    host, port = args.http.rsplit(":", 1)
    app = server.streamable_http_app(streamable_http_path="/mcp", stateless_http=True, json_response=True, host=host)
    anyio.run(uvicorn.Server(uvicorn.Config(app, host=host, port=int(port), log_level="warning")).serve)


if __name__ == "__main__":
    main()
