"""The PostgreSQL store's schema: migrations shipped in the package, applied by ``mcp-safety-gateway migrate``.

The migrations are the files ``migrations/NNNN_name.sql`` beside this module, applied in order. The
database records each one applied in ``schema_migrations`` (version, name, applied_at) inside the store's schema,
so the version of a database is the highest version listed there.

``migrate`` is idempotent: it takes a transaction-scoped advisory lock (so two replicas migrating at once take
turns), creates the schema if it is missing, and applies the missing migrations in that one transaction (DDL is
transactional in PostgreSQL: a failed migration leaves the database as it was). It refuses a database whose
version is newer than the newest migration it ships: a rollback of the gateway must not run on tables it does not
know. ``schema_refusal`` is what ``serve`` and ``check`` ask first: a sentence naming ``gateway.store`` when the
database's version is not exactly this gateway's (or it cannot be read), else None. The store itself never
migrates: changing a shared database is an operator's step.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources

from gateway.stores.postgres.url import PostgresUrl, parse_url

FOLDER = "migrations"
NAME = re.compile(r"^(\d{4})_(\w+)\.sql$")


@dataclass(frozen=True)
class Migration:
    """One shipped migration."""

    version: int
    name: str
    sql: str


class MigrationRefused(Exception):
    """The database cannot be migrated by this gateway; the message is a sentence naming gateway.store."""


def migrations() -> list[Migration]:
    """The migrations this package ships, oldest first."""
    found = []
    for item in resources.files("gateway.stores.postgres").joinpath(FOLDER).iterdir():
        match = NAME.match(item.name)
        if match:
            found.append(Migration(int(match.group(1)), match.group(2), item.read_text(encoding="utf-8")))
    found.sort(key=lambda migration: migration.version)
    if [migration.version for migration in found] != list(range(1, len(found) + 1)):
        raise RuntimeError(
            f"gateway/stores/postgres/{FOLDER}: migrations must be numbered 0001, 0002, ... without gaps"
        )
    return found


SCHEMA_VERSION = len(migrations())
"""The schema version this gateway runs on: its newest migration."""


async def migrate(url: str) -> tuple[int, list[str]]:
    """Bring the store's schema up to SCHEMA_VERSION; the version it was at and the migrations applied. Raises
    MigrationRefused for a newer schema, ValueError for a bad URL, psycopg.Error when the server fails."""
    import psycopg
    from psycopg import sql

    parsed = parse_url(url)
    schema = sql.Identifier(parsed.schema)
    async with await psycopg.AsyncConnection.connect(parsed.conninfo, autocommit=True) as conn, conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [f"mcp-safety-gateway:{parsed.schema}"])
        await conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(schema))
        await conn.execute("SELECT set_config('search_path', %s, true)", [parsed.schema])
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        cursor = await conn.execute("SELECT coalesce(max(version), 0) FROM schema_migrations")
        row = await cursor.fetchone()
        was = int(row[0]) if row is not None else 0
        if was > SCHEMA_VERSION:
            raise MigrationRefused(_newer(parsed, was))
        applied = []
        for migration in migrations()[was:]:
            await conn.execute(migration.sql.encode())  # several statements: sent as one simple query
            await conn.execute(
                "INSERT INTO schema_migrations (version, name) VALUES (%s, %s)", [migration.version, migration.name]
            )
            applied.append(f"{migration.version:04}_{migration.name}")
    return was, applied


async def database_version(parsed: PostgresUrl) -> int | None:
    """The schema version recorded in the store's database (0: none), None when the schema does not exist."""
    import psycopg
    from psycopg import sql

    async with await psycopg.AsyncConnection.connect(parsed.conninfo, autocommit=True) as conn:
        cursor = await conn.execute(
            "SELECT 1 FROM information_schema.tables WHERE table_schema = %s AND table_name = 'schema_migrations'",
            [parsed.schema],
        )
        if await cursor.fetchone() is None:
            return None
        query = sql.SQL("SELECT coalesce(max(version), 0) FROM {}.schema_migrations").format(
            sql.Identifier(parsed.schema)
        )
        row = await (await conn.execute(query)).fetchone()
        return int(row[0]) if row is not None else 0


async def schema_refusal(url: str) -> str | None:
    """Why a gateway cannot run on this database (one sentence naming gateway.store), or None when its schema is
    exactly this gateway's."""
    import psycopg

    try:
        parsed = parse_url(url)
    except ValueError as exc:
        return str(exc)
    try:
        version = await database_version(parsed)
    except psycopg.Error as exc:
        return (
            f"gateway.store: cannot read the schema version of the PostgreSQL store ({type(exc).__name__}: "
            f"{_first_line(exc)}); is the server up and the URL right?"
        )
    if version == SCHEMA_VERSION:
        return None
    if version is not None and version > SCHEMA_VERSION:
        return _newer(parsed, version)
    found = "has no gateway tables" if not version else f"is at schema version {version}"
    return (
        f"gateway.store: the PostgreSQL schema {parsed.schema!r} {found}, and this gateway needs version "
        f"{SCHEMA_VERSION}: run `mcp-safety-gateway migrate` with this config first"
    )


def _newer(parsed: PostgresUrl, version: int) -> str:
    return (
        f"gateway.store: the PostgreSQL schema {parsed.schema!r} is at version {version}, newer than this gateway "
        f"knows ({SCHEMA_VERSION}): run the newer mcp-safety-gateway that migrated it"
    )


def _first_line(exc: Exception) -> str:
    """The first line of a driver error (its detail lines may quote SQL)."""
    return (str(exc).strip().splitlines() or [""])[0]
