"""``python -m tests.db_backend (--stdio | --http HOST:PORT) --db PATH [--seed-demo]``."""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server, ServerRequestContext

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS databases (name TEXT PRIMARY KEY, rows INTEGER NOT NULL,"
    " generation INTEGER NOT NULL, frozen INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS write_log (id INTEGER PRIMARY KEY AUTOINCREMENT, at TEXT, op TEXT, db TEXT)",
    "CREATE TABLE IF NOT EXISTS requests (id INTEGER PRIMARY KEY AUTOINCREMENT, method TEXT)",
)
DEMO = [("orders", 1200, 7, 0), ("analytics", 50, 2, 0), ("scratch", 3, 1, 0), ("ledger", 99000, 41, 1)]
TEMPLATES = [{"id": "blank", "rows": 0}, {"id": "sample", "rows": 40}, {"id": "full", "rows": 900}]
COMMANDS = ["list_databases", "describe", "templates", "restore", "drop"]
GOD_TOOL = types.Tool(
    name="manage_db",
    description=(
        "Database admin. command: list_databases | describe {name} | templates | "
        "restore {name, template} (replaces every row) | drop {name} (deletes the database for good)."
    ),
    input_schema={
        "type": "object",
        "properties": {"command": {"type": "string", "enum": COMMANDS}, "params": {"type": "object"}},
        "required": ["command"],
    },
)
STATUS = types.Tool(
    name="server_status",
    description="How many databases this server holds.",
    input_schema={"type": "object", "properties": {}, "additionalProperties": False},
    output_schema={
        "type": "object",
        "properties": {"databases": {"type": "integer", "minimum": 0}, "version": {"type": "string"}},
        "required": ["databases", "version"],
        "additionalProperties": False,
    },
    annotations=types.ToolAnnotations(
        read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
    ),
)
VACUUM = types.Tool(
    name="vacuum_database",
    description="Compact a database's storage.",
    input_schema={"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
)


class Databases:
    """The database table and its write log."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(path, isolation_level=None, timeout=10.0)
        self.db.execute("PRAGMA journal_mode=WAL")
        for statement in SCHEMA:
            self.db.execute(statement)

    def seed(self) -> None:
        if not self.db.execute("SELECT COUNT(*) FROM databases").fetchone()[0]:
            self.db.executemany("INSERT INTO databases VALUES (?, ?, ?, ?)", DEMO)

    def all(self) -> list[dict[str, Any]]:
        return [_db(row) for row in self.db.execute("SELECT * FROM databases")]

    def get(self, name: str) -> dict[str, Any]:
        row = self.db.execute("SELECT * FROM databases WHERE name = ?", (name,)).fetchone()
        if row is None:
            raise LookupError(f"unknown database {name!r}")
        return _db(row)

    def heard(self, method: str) -> None:
        """Log a request, so tests can tell what a client asked of this server."""
        self.db.execute("INSERT INTO requests (method) VALUES (?)", (method,))

    def write(self, op: str, name: str, sql: str, *params: Any) -> None:
        self.get(name)
        self.db.execute("BEGIN IMMEDIATE")
        self.db.execute(sql, params)
        self.db.execute(
            "INSERT INTO write_log (at, op, db) VALUES (?, ?, ?)", (datetime.now(UTC).isoformat(), op, name)
        )
        self.db.execute("COMMIT")


def _db(row: tuple[Any, ...]) -> dict[str, Any]:
    name, rows, generation, frozen = row
    return {"name": name, "rows": rows, "generation": generation, "frozen": bool(frozen)}


def _text(body: Any, *, is_error: bool = False) -> types.CallToolResult:
    text = body if isinstance(body, str) else json.dumps({"result": body})
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=is_error)


def build(dbs: Databases) -> Server[Any]:
    """The low-level server: tools from plain definitions, one handler for every call."""

    def manage_db(command: Any, params: dict[str, Any]) -> types.CallToolResult:
        if command == "list_databases":
            return _text(dbs.all())
        if command == "templates":
            return _text(TEMPLATES)
        name = str(params["name"])
        if command == "describe":
            return _text(dbs.get(name))
        if command == "restore":
            rows = next(t["rows"] for t in TEMPLATES if t["id"] == params["template"])
            dbs.write(
                "restore", name, "UPDATE databases SET rows = ?, generation = generation + 1 WHERE name = ?", rows, name
            )
            return _text(dbs.get(name))
        if command == "drop":
            dbs.write("drop", name, "DELETE FROM databases WHERE name = ?", name)
            return _text({"dropped": name})
        return _text(f"command must be one of {COMMANDS}", is_error=True)

    async def on_list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        dbs.heard("tools/list")
        return types.ListToolsResult(tools=[GOD_TOOL, STATUS, VACUUM])

    async def on_call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        args = params.arguments or {}
        dbs.heard(f"tools/call {params.name}")
        try:
            if params.name == "manage_db":
                return manage_db(args.get("command"), args.get("params") or {})
            if params.name == "server_status":
                body = {"databases": len(dbs.all()), "version": "5.2"}
                return types.CallToolResult(
                    content=[types.TextContent(type="text", text=json.dumps(body))], structured_content=body
                )
            if params.name == "vacuum_database":
                dbs.get(str(args["name"]))
                return _text({"vacuumed": args["name"]})
        except (LookupError, KeyError, StopIteration, TypeError) as exc:
            return _text(str(exc.args[0]) if exc.args else "bad request", is_error=True)
        return _text(f"no tool {params.name!r}", is_error=True)

    return Server("legacy-db-admin", version="5.2.0", on_list_tools=on_list_tools, on_call_tool=on_call_tool)


def build_parser() -> argparse.ArgumentParser:
    """The command line: transport, database file, seeding."""
    parser = argparse.ArgumentParser(prog="db_backend")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--stdio", action="store_true")
    mode.add_argument("--http")
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--seed-demo", action="store_true")
    return parser


def server_for(argv: list[str]) -> Server[Any]:
    """The server a command line describes, opened and seeded but not running (tests run it in process)."""
    args = build_parser().parse_args(argv)
    dbs = Databases(args.db)
    if args.seed_demo:
        dbs.seed()
    return build(dbs)


async def _serve_stdio(server: Server[Any]) -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def main() -> None:
    args = build_parser().parse_args()
    server = server_for(sys.argv[1:])
    if args.stdio:
        anyio.run(_serve_stdio, server)
        return
    import uvicorn

    host, port = args.http.rsplit(":", 1)
    app = server.streamable_http_app(streamable_http_path="/mcp", stateless_http=True, json_response=True, host=host)
    anyio.run(uvicorn.Server(uvicorn.Config(app, host=host, port=int(port), log_level="warning")).serve)


if __name__ == "__main__":
    main()
