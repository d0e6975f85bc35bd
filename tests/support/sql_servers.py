"""Real statement-executing MCP servers over throwaway databases: the god-tools of the statement tool kind.

- ``dbhub``: npm ``@bytebase/dbhub`` as pinned in tests/system/sqlservers/package-lock.json, over stdio, against a
  database of its own on the session's PostgreSQL server (tests/support/postgres.py). One tool, ``execute_sql
  {sql}``, for reads and writes alike.
- ``alchemy``: PyPI ``mcp-alchemy`` in tests/system/sqlservers/.venv-alchemy (it pins its own mcp and SQLAlchemy),
  over stdio, against a SQLite file. Its tool is ``execute_query {query, params}``.

.ci/setup-sqlservers.sh installs both. Each database gets the same small schema, seeded alike: three tenants
(``tn_a`` with 5 rows, ``tn_b`` with 3, one of them with a NULL payload, ``tn_p`` protected with none), an
``audit_log`` with two entries, and a ``"Tenant Notes"`` table whose quoted, mixed-case name only a quoted
reference reaches in PostgreSQL. ``counts`` reads how many rows each table holds, and ``contents`` everything a
statement could change (columns, rows, sequences), so a test can assert that a refused statement changed nothing.
"""

from __future__ import annotations

import os
import sqlite3
import tomllib
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TextIO

import psycopg
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.support.processes import ROOT

HERE = ROOT / "tests" / "system" / "sqlservers"
DBHUB = HERE / "node_modules" / "@bytebase" / "dbhub" / "dist" / "index.js"
ALCHEMY = HERE / ".venv-alchemy" / "bin" / "mcp-alchemy"
STARTUP_TIMEOUT = 60.0  # the first start of a Node or Python server on a loaded 2-core machine

SCHEMA = """
CREATE TABLE tenants (id text PRIMARY KEY, name text, protected boolean NOT NULL DEFAULT false,
                      version integer NOT NULL DEFAULT 1);
CREATE TABLE rows (id {serial} PRIMARY KEY, tenant_id text NOT NULL REFERENCES tenants (id), payload text);
CREATE TABLE audit_log (id {serial} PRIMARY KEY, tenant_id text, action text NOT NULL);
CREATE TABLE "Tenant Notes" ("Tenant" text NOT NULL, "Note" text);
INSERT INTO tenants (id, name, protected) VALUES ('tn_a', 'Alpha', false), ('tn_b', NULL, false),
                                                 ('tn_p', 'Protected', true);
INSERT INTO rows (tenant_id, payload) VALUES ('tn_a', 'a1'), ('tn_a', 'a2'), ('tn_a', 'a3'), ('tn_a', 'a4'),
                                             ('tn_a', 'a5'), ('tn_b', 'b1'), ('tn_b', NULL), ('tn_b', 'b3');
INSERT INTO audit_log (tenant_id, action) VALUES ('tn_a', 'seed'), ('tn_b', 'seed');
INSERT INTO "Tenant Notes" VALUES ('tn_a', 'first');
"""
TABLES = ("tenants", "rows", "audit_log", '"Tenant Notes"')
SEEDED = {"tenants": 3, "rows": 8, "audit_log": 2, '"Tenant Notes"': 1}


def dbhub_missing() -> str | None:
    """Why dbhub cannot run here, or None."""
    if not DBHUB.is_file():
        return "dbhub is not installed (bash .ci/setup-sqlservers.sh)"
    return None


def alchemy_missing() -> str | None:
    """Why mcp-alchemy cannot run here, or None."""
    if not ALCHEMY.is_file():
        return "mcp-alchemy is not installed (bash .ci/setup-sqlservers.sh)"
    return None


def postgres_database(server_url: str) -> str:
    """A new database on the server, with the schema and seed rows; its URL."""
    name = f"sql_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    url = server_url.rsplit("/", 1)[0] + f"/{name}"
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(SCHEMA.format(serial="bigserial").encode())
    return url


def sqlite_database(path: Path) -> Path:
    """A new SQLite file with the schema and seed rows."""
    with sqlite3.connect(path) as connection:
        connection.executescript(SCHEMA.format(serial="integer"))
    connection.close()
    return path


def counts(database: str | Path) -> dict[str, int]:
    """How many rows each table of the schema holds now (a PostgreSQL URL or a SQLite file)."""
    if isinstance(database, Path):
        with sqlite3.connect(database) as lite:
            found = {table: int(lite.execute(f"SELECT count(*) FROM {table}").fetchone()[0]) for table in TABLES}
        lite.close()
        return found
    with psycopg.connect(database, autocommit=True) as connection:
        return {table: _count(connection, table) for table in TABLES}


def contents(database: str | Path) -> dict[str, Any]:
    """Everything a statement could have changed: every table's columns and rows (sorted), the schema's tables,
    and the sequences' positions (PostgreSQL). Equal before and after a refusal: nothing ran."""
    if isinstance(database, Path):
        with sqlite3.connect(database) as lite:
            found: dict[str, Any] = {
                "tables": sorted(row[0] for row in lite.execute("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL")),
                **{table: sorted(map(repr, lite.execute(f"SELECT * FROM {table}"))) for table in TABLES},
            }
        lite.close()
        return found
    with psycopg.connect(database, autocommit=True) as connection:
        columns = connection.execute(
            "SELECT table_name, column_name, data_type FROM information_schema.columns"
            " WHERE table_schema = 'public' ORDER BY 1, 2"
        ).fetchall()
        rows = {
            table: sorted(map(repr, connection.execute(f"SELECT * FROM {table}".encode()).fetchall()))
            for table in TABLES
        }
        sequences = connection.execute(
            "SELECT sequencename, last_value FROM pg_sequences WHERE schemaname = 'public' ORDER BY 1"
        ).fetchall()
    return {"columns": columns, "sequences": sequences, **rows}


def _count(connection: psycopg.Connection[tuple[Any, ...]], table: str) -> int:
    row = connection.execute(f"SELECT count(*) FROM {table}".encode()).fetchone()
    assert row is not None
    return int(row[0])


def dbhub_params(database_url: str) -> StdioServerParameters:
    """dbhub over stdio against one PostgreSQL database (its DSN form: postgres://..., TLS off on loopback)."""
    dsn = database_url.replace("postgresql://", "postgres://", 1) + "?sslmode=disable"
    return StdioServerParameters(command="node", args=[str(DBHUB), "--transport", "stdio", "--dsn", dsn])


def dbhub_split_params(database_url: str, directory: Path) -> StdioServerParameters:
    """dbhub with two sources on one database, from a dbhub.toml written into ``directory``: ``execute_sql_main``
    for writes and ``execute_sql_reader``, read-only (dbhub checks the leading keyword, then runs the statement in
    ``BEGIN READ ONLY``), for reads and measuring reads."""
    dsn = database_url.replace("postgresql://", "postgres://", 1) + "?sslmode=disable"
    config = directory / "dbhub.toml"
    config.write_text(
        "".join(f'[[sources]]\nid = "{source}"\ndsn = "{dsn}"\n\n' for source in ("main", "reader"))
        + '[[tools]]\nname = "execute_sql"\nsource = "reader"\nreadonly = true\n'
    )
    return StdioServerParameters(command="node", args=[str(DBHUB), "--transport", "stdio", "--config", str(config)])


def alchemy_params(database: Path) -> StdioServerParameters:
    """mcp-alchemy over stdio against one SQLite file."""
    return StdioServerParameters(
        command=str(ALCHEMY), args=[], env={"DB_URL": f"sqlite:///{database}", "PATH": os.environ.get("PATH", "")}
    )


@asynccontextmanager
async def connected(params: StdioServerParameters, errlog: TextIO) -> AsyncIterator[Client]:
    """The real MCP SDK client, connected to a server process on stdio (its stderr into ``errlog``)."""
    async with Client(
        stdio_client(params, errlog=errlog), mode="legacy", read_timeout_seconds=STARTUP_TIMEOUT
    ) as client:
        yield client


SHIPPED = ROOT / "config" / "dbhub" / "gateway.toml"
"""The copy-paste config for dbhub the README shows: the tests wrap dbhub with it, only its backend's command line
and dbhub's own DSN changed."""


def dbhub_gateway_data(database_url: str, directory: Path, **gateway: Any) -> dict[str, Any]:
    """The shipped dbhub config over one test database: dbhub (as pinned here) with two sources from a dbhub.toml
    in ``directory``, the store and state in ``directory`` too (``gateway`` adds to ``[gateway]``)."""
    params = dbhub_split_params(database_url, directory)
    data = tomllib.loads(SHIPPED.read_text(encoding="utf-8"))
    data["backend"] = {"command": params.command, "args": list(params.args), "connect_timeout_seconds": STARTUP_TIMEOUT}
    data["gateway"] = {"store": "memory", "state_dir": str(directory / "state"), **gateway}
    data["rate_limits"] = {"per_caller": {"per_second": 1e9, "burst": 1_000_000_000}}
    return data


def alchemy_gateway_data(database: Path, directory: Path) -> dict[str, Any]:
    """mcp-alchemy over one SQLite file, wrapped by TOML alone: its ``execute_query {query}`` for reads, measures
    and writes alike (it has no read-only tool), answering text."""
    return {
        "gateway": {"store": "memory", "state_dir": str(directory / "state")},
        "backend": {
            "command": str(ALCHEMY),
            "env": {"DB_URL": f"sqlite:///{database}"},
            "connect_timeout_seconds": STARTUP_TIMEOUT,
        },
        "rate_limits": {"per_caller": {"per_second": 1e9, "burst": 1_000_000_000}},
        "statements": {
            "lite": {
                "tool": "execute_query",
                "argument": "query",
                "dialect": "sqlite",
                "answers": "mcp-alchemy",
                "tables": ["tenants", "rows", "audit_log"],
            }
        },
        "tools": {
            "query": {"kind": "statement_query", "statements": "lite", "max_rows": 50},
            "preview_statement": {"kind": "statement_preview", "statements": "lite"},
            "execute_statement": {"kind": "statement_execute", "preview": "preview_statement"},
        },
    }
