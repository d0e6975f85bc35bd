"""SQLite storage for the legacy backend: tenants, their rows, fixtures, the write log and fault counters."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

JSONObject = dict[str, Any]

DEFAULT_FIXTURES: dict[str, int] = {"empty": 0, "smoke": 25, "checkout": 812, "load": 5000}

# (id, name, fixture, protected)
DEMO_TENANTS: tuple[tuple[str, str, str, bool], ...] = (
    ("tn_checkout01", "Checkout QA", "checkout", False),
    ("tn_search02", "Search QA", "smoke", False),
    ("tn_billing03", "Billing QA", "empty", False),
    ("tn_load04", "Load test", "load", False),
    ("tn_prod_eu", "Production EU", "smoke", True),
)

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS tenants (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        version INTEGER NOT NULL,
        protected INTEGER NOT NULL DEFAULT 0
    )""",
    """CREATE TABLE IF NOT EXISTS rows (
        tenant_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        payload TEXT NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS rows_tenant_id ON rows (tenant_id)",
    """CREATE TABLE IF NOT EXISTS fixtures (
        name TEXT PRIMARY KEY,
        row_count INTEGER NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS write_log (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        at TEXT NOT NULL,
        action TEXT NOT NULL,
        tenant_id TEXT NOT NULL,
        detail TEXT NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS fault_fires (
        name TEXT PRIMARY KEY,
        fired INTEGER NOT NULL
    )""",
)

_TENANT_SELECT = (
    "SELECT t.id, t.name, t.version, t.protected, (SELECT COUNT(*) FROM rows r WHERE r.tenant_id = t.id) FROM tenants t"
)


class StoreError(Exception):
    """A request the store refuses; the message is meant for the caller."""


class TenantNotFoundError(StoreError):
    """The tenant id does not exist."""

    def __init__(self, tenant_id: str) -> None:
        super().__init__(f"Tenant {tenant_id} not found")


class TenantExistsError(StoreError):
    """A tenant with this id already exists."""

    def __init__(self, tenant_id: str) -> None:
        super().__init__(f"Tenant {tenant_id} already exists")


class UnknownFixtureError(StoreError):
    """The fixture name is not in the fixtures table."""

    def __init__(self, fixture: str, known: list[str]) -> None:
        super().__init__(f"Unknown fixture '{fixture}'. Available fixtures: {', '.join(known)}")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _row_payloads(tenant_id: str, fixture: str, count: int) -> Iterator[tuple[str, int, str]]:
    for seq in range(1, count + 1):
        yield tenant_id, seq, f'{{"fixture":"{fixture}","seq":{seq}}}'


def _tenant_json(row: tuple[Any, ...]) -> JSONObject:
    tenant_id, name, version, protected, rows = row
    return {"id": tenant_id, "name": name, "rows": rows, "version": version, "protected": bool(protected)}


class Store:
    """One SQLite connection (WAL, autocommit) with explicit write transactions.

    ``ids_ignore_case``: tenant ids match whatever their case (``Tn_Prod_Eu`` finds ``tn_prod_eu``), as many
    real servers do; answers always carry the stored id."""

    def __init__(self, path: Path, *, ids_ignore_case: bool = False) -> None:
        """Open (creating if needed) the database file and its schema."""
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._id_match = "= ? COLLATE NOCASE" if ids_ignore_case else "= ?"
        self._conn = sqlite3.connect(path, isolation_level=None, timeout=10.0)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute("PRAGMA busy_timeout=10000")
        with self.transaction():
            for statement in _SCHEMA:
                self._conn.execute(statement)
            if self._conn.execute("SELECT COUNT(*) FROM fixtures").fetchone()[0] == 0:
                self._conn.executemany("INSERT INTO fixtures (name, row_count) VALUES (?, ?)", DEFAULT_FIXTURES.items())

    def close(self) -> None:
        """Close the connection."""
        self._conn.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Run the block in one IMMEDIATE transaction; roll back on any exception."""
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    def _require_transaction(self) -> None:
        if not self._conn.in_transaction:
            raise RuntimeError("write outside a transaction")

    # -- seeding ---------------------------------------------------------------------------------------------

    def seed(self, *, demo: bool, bulk_tenants: int) -> int:
        """Add demo and/or bulk tenants if the database has no tenants; return how many were added."""
        if not demo and bulk_tenants <= 0:
            return 0
        with self.transaction():
            if self._conn.execute("SELECT EXISTS (SELECT 1 FROM tenants)").fetchone()[0]:
                return 0
            added = 0
            if demo:
                fixtures = self.fixtures()
                for tenant_id, name, fixture, protected in DEMO_TENANTS:
                    self._conn.execute(
                        "INSERT INTO tenants (id, name, version, protected) VALUES (?, ?, 1, ?)",
                        (tenant_id, name, int(protected)),
                    )
                    self._insert_rows(tenant_id, fixture, fixtures.get(fixture, 0))
                    added += 1
            if bulk_tenants > 0:
                self._conn.executemany(
                    "INSERT INTO tenants (id, name, version, protected) VALUES (?, ?, 1, 0)",
                    ((f"tn_bulk{i:06d}", f"Bulk tenant {i}") for i in range(1, bulk_tenants + 1)),
                )
                added += bulk_tenants
            return added

    def _insert_rows(self, tenant_id: str, fixture: str, count: int) -> None:
        self._conn.executemany(
            "INSERT INTO rows (tenant_id, seq, payload) VALUES (?, ?, ?)",
            _row_payloads(tenant_id, fixture, count),
        )

    # -- reads -----------------------------------------------------------------------------------------------

    def list_tenants(self) -> list[JSONObject]:
        """Every tenant, ordered by id."""
        cursor = self._conn.execute(f"{_TENANT_SELECT} ORDER BY t.id")
        return [_tenant_json(row) for row in cursor]

    def get_tenant(self, tenant_id: str) -> JSONObject:
        """One tenant, or TenantNotFoundError."""
        row = self._conn.execute(f"{_TENANT_SELECT} WHERE t.id {self._id_match}", (tenant_id,)).fetchone()
        if row is None:
            raise TenantNotFoundError(tenant_id)
        return _tenant_json(row)

    def _stored_id(self, tenant_id: str) -> str:
        """The id as stored, for an id as asked; TenantNotFoundError if none matches."""
        row = self._conn.execute(f"SELECT id FROM tenants WHERE id {self._id_match}", (tenant_id,)).fetchone()
        if row is None:
            raise TenantNotFoundError(tenant_id)
        return str(row[0])

    def fixtures(self) -> dict[str, int]:
        """Fixture name -> row count, in row-count order."""
        cursor = self._conn.execute("SELECT name, row_count FROM fixtures ORDER BY row_count, name")
        return {name: count for name, count in cursor}

    def fault_fires(self, name: str) -> int:
        """How many times the named fault has fired on this database."""
        row = self._conn.execute("SELECT fired FROM fault_fires WHERE name = ?", (name,)).fetchone()
        return 0 if row is None else int(row[0])

    # -- writes (call inside transaction()) ------------------------------------------------------------------

    def claim_fault(self, name: str, limit: int | None) -> bool:
        """Count one fire of the named fault unless it reached its limit; True if it fires."""
        self._require_transaction()
        fired = self.fault_fires(name)
        if limit is not None and fired >= limit:
            return False
        self._conn.execute(
            "INSERT INTO fault_fires (name, fired) VALUES (?, 1) ON CONFLICT (name) DO UPDATE SET fired = fired + 1",
            (name,),
        )
        return True

    def _bump_version(self, tenant_id: str) -> int:
        cursor = self._conn.execute("UPDATE tenants SET version = version + 1 WHERE id = ?", (tenant_id,))
        if cursor.rowcount == 0:
            raise TenantNotFoundError(tenant_id)
        return int(self._conn.execute("SELECT version FROM tenants WHERE id = ?", (tenant_id,)).fetchone()[0])

    def _log_write(self, action: str, tenant_id: str, detail: JSONObject) -> None:
        self._conn.execute(
            "INSERT INTO write_log (at, action, tenant_id, detail) VALUES (?, ?, ?, ?)",
            (_now(), action, tenant_id, json.dumps(detail, separators=(",", ":"))),
        )

    def reseed(self, tenant_id: str, fixture: str) -> JSONObject:
        """Replace the tenant's rows with the fixture's rows and bump its version."""
        self._require_transaction()
        fixtures = self.fixtures()
        if fixture not in fixtures:
            raise UnknownFixtureError(fixture, sorted(fixtures))
        tenant_id = self._stored_id(tenant_id)
        deleted = self._conn.execute("DELETE FROM rows WHERE tenant_id = ?", (tenant_id,)).rowcount
        self._insert_rows(tenant_id, fixture, fixtures[fixture])
        version = self._bump_version(tenant_id)
        result: JSONObject = {
            "id": tenant_id,
            "fixture": fixture,
            "rowsDeleted": deleted,
            "rowsInserted": fixtures[fixture],
            "version": version,
        }
        self._log_write("reseed", tenant_id, result)
        return result

    def wipe(self, tenant_id: str) -> JSONObject:
        """Delete the tenant's rows and bump its version."""
        self._require_transaction()
        tenant_id = self._stored_id(tenant_id)
        deleted = self._conn.execute("DELETE FROM rows WHERE tenant_id = ?", (tenant_id,)).rowcount
        version = self._bump_version(tenant_id)
        result: JSONObject = {"id": tenant_id, "rowsDeleted": deleted, "version": version}
        self._log_write("wipe", tenant_id, result)
        return result

    def create(self, tenant_id: str, name: str, protected: bool) -> JSONObject:
        """Insert a tenant with no rows at version 1."""
        self._require_transaction()
        try:
            self._conn.execute(
                "INSERT INTO tenants (id, name, version, protected) VALUES (?, ?, 1, ?)",
                (tenant_id, name, int(protected)),
            )
        except sqlite3.IntegrityError:
            raise TenantExistsError(tenant_id) from None
        tenant = self.get_tenant(tenant_id)
        self._log_write("create", tenant_id, tenant)
        return tenant
