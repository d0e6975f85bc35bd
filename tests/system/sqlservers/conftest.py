"""The statement-executing servers every module here drives (tests/support/sql_servers.py). Locally a test skips
when .ci/setup-sqlservers.sh has not installed them; in CI (``CI`` set) it fails instead."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.postgres import PostgresServer
from tests.support.sql_servers import alchemy_missing, dbhub_missing, postgres_database, sqlite_database


def _needed(missing: str | None) -> None:
    if missing is None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"statement-executing servers must run in CI: {missing}")
    pytest.skip(missing)


@pytest.fixture
def pg_database(postgres_server: PostgresServer) -> str:
    """A fresh, seeded database on the session's PostgreSQL server, for dbhub (its URL)."""
    _needed(dbhub_missing())
    return postgres_database(postgres_server.url)


@pytest.fixture
def sqlite_file(tmp_path: Path) -> Path:
    """A fresh, seeded SQLite file, for mcp-alchemy."""
    _needed(alchemy_missing())
    return sqlite_database(tmp_path / "alchemy.db")


@pytest.fixture(scope="module")
def shared_pg_database(postgres_server: PostgresServer) -> str:
    """One seeded database for a whole module (its tests snapshot what they assert), for a gateway over dbhub."""
    _needed(dbhub_missing())
    return postgres_database(postgres_server.url)
