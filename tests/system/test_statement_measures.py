"""The statement analysis held against a real PostgreSQL: a write's measuring read counts exactly the rows the write
then changes, its fingerprint moves exactly when those rows do, what the analysis calls a read runs in a read-only
transaction while the writes it finds hidden in reads do not, and the normalised text changes what the original
changes. Each write runs in a transaction that is rolled back, on a seeded database of the test's own."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from gateway.statements.analysis import analyse
from gateway.statements.model import DDL, TRUNCATE, Dialect, Measure, Statement
from gateway.statements.refusals import Refusal, StatementRefused
from gateway.statements.rules import DEFAULT_CLASSES, Rules
from tests.support.postgres import PostgresServer
from tests.support.sql_servers import postgres_database

RULES = Rules(Dialect.POSTGRES, classes=DEFAULT_CLASSES | {DDL, TRUNCATE})
MORE = """
INSERT INTO audit_log (tenant_id, action) VALUES ('tn_a', 'again'), ('tn_a', 'and again');
CREATE TABLE parent (id int, flag boolean);
CREATE TABLE child () INHERITS (parent);
INSERT INTO parent VALUES (1, true), (2, NULL);
INSERT INTO child VALUES (3, true), (4, false);
CREATE TABLE events (id int, tenant_id text) PARTITION BY LIST (tenant_id);
CREATE TABLE events_a PARTITION OF events FOR VALUES IN ('tn_a');
CREATE TABLE events_b PARTITION OF events FOR VALUES IN ('tn_b');
INSERT INTO events VALUES (1, 'tn_a'), (2, 'tn_b'), (3, 'tn_a');
"""
Connection = psycopg.Connection[tuple[Any, ...]]


@pytest.fixture
def db(postgres_server: PostgresServer) -> Iterator[Connection]:
    """A connection to a fresh, seeded database (tests/support/sql_servers.py's schema and a few tables more)."""
    url = postgres_database(postgres_server.url)
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(MORE.encode())
        yield connection


def one(connection: Connection, sql: str) -> tuple[Any, ...]:
    row = connection.execute(sql.encode()).fetchone()
    assert row is not None
    return row


def measure_of(statement: Statement) -> Measure:
    assert statement.measure is not None
    return statement.measure


def changed_by(connection: Connection, sql: str) -> int:
    """The rows a write changes, as the server reports them, with the write rolled back."""
    with connection.transaction(force_rollback=True):
        return connection.execute(sql.encode()).rowcount


MATCHED = [
    ("DELETE FROM rows WHERE tenant_id = 'tn_b'", 3),
    ("DELETE FROM rows WHERE payload <> 'b1'", 6),  # NULL <> 'b1' is NULL: that row stays
    ("DELETE FROM rows WHERE payload IS DISTINCT FROM 'b1'", 7),
    ("DELETE FROM rows WHERE payload NOT IN ('a1', NULL)", 0),  # NOT IN with a NULL matches nothing
    ("DELETE FROM rows WHERE NOT (payload = 'a1')", 6),
    ("DELETE FROM rows", 8),
    ("DELETE FROM rows r USING tenants t WHERE r.tenant_id = t.id AND t.name IS NULL", 3),
    ("DELETE FROM rows USING audit_log WHERE rows.tenant_id = audit_log.tenant_id", 8),  # tn_a's rows join 3 times
    ("UPDATE rows SET payload = 'x' FROM audit_log WHERE rows.tenant_id = audit_log.tenant_id", 8),
    ("UPDATE tenants SET version = version + 1 WHERE id IN (SELECT tenant_id FROM rows)", 2),
    ("DELETE FROM rows WHERE id IN (SELECT id FROM rows ORDER BY id LIMIT 2)", 2),
    ('DELETE FROM "Tenant Notes" WHERE "Tenant" = \'tn_a\'', 1),
    ("DELETE FROM parent WHERE flag", 2),  # a parent's rows and its child's
    ("DELETE FROM ONLY parent WHERE flag", 1),
    ("DELETE FROM parent WHERE flag IS NOT TRUE", 2),
    ("DELETE FROM events USING tenants WHERE events.tenant_id = tenants.id", 3),  # equal ctids in two partitions
    ("UPDATE events SET id = events.id FROM tenants t WHERE events.tenant_id = t.id AND t.name IS NOT NULL", 2),
]


@pytest.mark.parametrize(("sql", "expected"), MATCHED)
def test_the_measuring_read_counts_exactly_the_rows_the_write_then_changes(
    db: Connection, sql: str, expected: int
) -> None:
    statement = analyse(sql, RULES)
    measure = measure_of(statement)
    assert measure.count_sql is not None and measure.fingerprint_sql is not None
    counted = one(db, measure.count_sql)[0]
    rows, fingerprint = one(db, measure.fingerprint_sql)
    assert counted == rows == expected
    assert len(fingerprint) == (32 if expected else 0)
    assert changed_by(db, statement.text) == expected
    assert changed_by(db, sql) == expected  # the normalised text changes what the original does


def test_an_insert_is_measured_by_the_rows_it_gives_or_selects(db: Connection) -> None:
    given = analyse("INSERT INTO audit_log (tenant_id, action) VALUES ('tn_a', 'x'), ('tn_b', 'y')", RULES)
    assert measure_of(given).given == 2 == changed_by(db, given.text)
    selected = analyse(
        "INSERT INTO audit_log (tenant_id, action) SELECT id, 'touch' FROM tenants WHERE NOT protected", RULES
    )
    count_sql = measure_of(selected).count_sql
    assert count_sql is not None
    assert one(db, count_sql)[0] == 2 == changed_by(db, selected.text)


@pytest.mark.parametrize(
    ("sql", "table", "expected"),
    [("TRUNCATE rows", "rows", 8), ('DROP TABLE "Tenant Notes"', None, 1), ("TRUNCATE parent", "parent", 4)],
)
def test_emptying_or_dropping_a_table_is_measured_by_the_rows_it_loses(
    db: Connection, sql: str, table: str | None, expected: int
) -> None:
    statement = analyse(sql, RULES)
    measure = measure_of(statement)
    assert measure.count_sql is not None and measure.fingerprint_sql is not None
    assert one(db, measure.count_sql)[0] == expected == one(db, measure.fingerprint_sql)[0]
    with db.transaction(force_rollback=True):
        db.execute(statement.text.encode())
        if table is not None:
            assert one(db, f"SELECT count(*) FROM {table}")[0] == 0


def test_the_fingerprint_moves_exactly_when_the_affected_rows_do(db: Connection) -> None:
    measure = measure_of(analyse("DELETE FROM rows WHERE tenant_id = 'tn_b'", RULES))
    assert measure.fingerprint_sql is not None

    def taken() -> tuple[Any, ...]:
        assert measure.fingerprint_sql is not None
        return one(db, measure.fingerprint_sql)

    first = taken()
    assert taken() == first
    db.execute(b"UPDATE rows SET payload = 'elsewhere' WHERE tenant_id = 'tn_a'")
    assert taken() == first  # other rows changed: the plan still holds
    db.execute(b"UPDATE rows SET payload = payload WHERE tenant_id = 'tn_b' AND payload = 'b1'")
    updated = taken()
    assert updated[0] == first[0] and updated != first  # same count, a row rewritten
    db.execute(b"DELETE FROM rows WHERE payload = 'b3'")
    db.execute(b"INSERT INTO rows (tenant_id, payload) VALUES ('tn_b', 'b4')")
    swapped = taken()
    assert swapped[0] == first[0] and swapped not in (first, updated)  # same count, another row
    db.execute(b"VACUUM FULL rows")
    assert taken() != swapped  # a table rewrite reads as a change too: previewed again, never fresh


READS = [
    "SELECT t.id, count(r.id) FROM tenants t LEFT JOIN rows r ON r.tenant_id = t.id GROUP BY t.id",
    "WITH b AS (SELECT * FROM rows WHERE tenant_id = 'tn_b') SELECT count(*) FROM b",
    'SELECT "Tenant", "Note" FROM "Tenant Notes"',
    "SELECT * FROM parent WHERE flag IS NOT TRUE",
]
HIDDEN = [
    ("WITH d AS (DELETE FROM rows RETURNING *) SELECT count(*) FROM d", Refusal.HIDDEN_WRITE),
    ("SELECT * INTO copy FROM rows", Refusal.HIDDEN_WRITE),
    ("SELECT * FROM rows FOR UPDATE", Refusal.HIDDEN_WRITE),
    ("SELECT nextval('rows_id_seq')", Refusal.FUNCTION_NOT_ALLOWED),
    ("SELECT set_config('default_transaction_read_only', 'off', false)", Refusal.FUNCTION_NOT_ALLOWED),
]


def test_what_the_analysis_calls_a_read_runs_in_a_read_only_transaction_and_the_writes_it_finds_do_not(
    db: Connection,
) -> None:
    for sql in READS:
        statement = analyse(sql, RULES, expect="read")
        with db.transaction(force_rollback=True):
            db.execute(b"SET TRANSACTION READ ONLY")
            db.execute(statement.text.encode())
    for sql, reason in HIDDEN:
        with pytest.raises(StatementRefused) as refused:
            analyse(sql, RULES, expect="read")
        assert refused.value.reason == reason
    for sql, _ in HIDDEN[:4]:  # each of these writes: PostgreSQL itself refuses it in a read-only transaction
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction), db.transaction(force_rollback=True):
            db.execute(b"SET TRANSACTION READ ONLY")
            db.execute(sql.encode())
    with db.transaction(force_rollback=True):  # ... but not all: a read-only transaction is no function list
        db.execute(b"SET TRANSACTION READ ONLY")
        db.execute(b"SELECT pg_cancel_backend(0)")


def test_a_backslash_in_a_string_is_refused_because_the_server_setting_decides_what_it_means(db: Connection) -> None:
    with pytest.raises(StatementRefused) as refused:
        analyse("SELECT E'a\\\\b' AS s", RULES)
    assert refused.value.reason == Refusal.AMBIGUOUS_STRING
    printed = "SELECT 'a\\b' AS s"  # what the normalised text would hold
    assert one(db, printed)[0] == "a\\b"
    with db.transaction(force_rollback=True):
        db.execute(b"SET LOCAL standard_conforming_strings = off")
        assert one(db, printed)[0] == "a\b"  # the same text: an a and a backspace
