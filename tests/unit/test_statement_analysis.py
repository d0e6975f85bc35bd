"""What the statement analysis says about statements it lets through: class, normalised text, digest, tables with
each dialect's name rules, and the reads that measure a write. (The refusals: test_statement_attacks.py; the
measures against a real PostgreSQL: tests/system/test_statement_measures.py.)"""

from __future__ import annotations

import ast
import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.statements.analysis import allowed_tables, analyse
from gateway.statements.model import (
    DDL,
    DELETE,
    INSERT,
    READ,
    TRUNCATE,
    UPDATE,
    Dialect,
    Measure,
    Statement,
    StatementClass,
    Table,
)
from gateway.statements.refusals import StatementRefused
from gateway.statements.rules import DEFAULT_CLASSES, Rules
from tests.support.processes import ROOT

PG, LITE = Dialect.POSTGRES, Dialect.SQLITE
EVERY_CLASS = DEFAULT_CLASSES | {DDL, TRUNCATE}


def analysed(dialect: Dialect, sql: str) -> Statement:
    return analyse(sql, Rules(dialect, classes=EVERY_CLASS))


NORMALISED = [
    (PG, "select ID from Tenants where NAME = 'x' -- why", READ, "SELECT id FROM tenants WHERE name = 'x'"),
    (PG, "SELECT $$it's$$, E'a\\nb'", READ, "SELECT 'it''s', 'a\nb'"),
    (PG, 'SELECT * FROM "café"', READ, 'SELECT * FROM "café"'),
    (PG, "TABLE tenants", READ, "SELECT * FROM tenants"),
    (PG, "(SELECT 1)", READ, "SELECT 1"),
    (PG, "delete from rows r using tenants t where r.tenant_id = t.id", DELETE, None),
    (PG, "insert into rows (tenant_id) values ('a')", INSERT, "INSERT INTO rows (tenant_id) VALUES ('a')"),
    (PG, "update ONLY rows set id = id + 1", UPDATE, "UPDATE ONLY rows SET id = id + 1"),
    (PG, "truncate rows", TRUNCATE, "TRUNCATE TABLE rows"),
    (LITE, "select ID from [Tenants] where NAME = 'x' -- why", READ, "SELECT ID FROM \"Tenants\" WHERE NAME = 'x'"),
    (LITE, "SELECT ifnull(a, 1) FROM t", READ, "SELECT COALESCE(a, 1) FROM t"),
    (LITE, "delete from rows where id = 1;", DELETE, "DELETE FROM rows WHERE id = 1"),
]


@pytest.mark.parametrize(("dialect", "sql", "kind", "normalised"), NORMALISED)
def test_the_normalised_text_is_canonical_commentless_and_reads_back_to_itself(
    dialect: Dialect, sql: str, kind: StatementClass, normalised: str | None
) -> None:
    statement = analysed(dialect, sql)
    assert statement.kind == kind
    if normalised is not None:
        assert statement.text == normalised
    again = analysed(dialect, statement.text)
    assert (again.text, again.kind, again.tables, again.digest) == (
        statement.text,
        statement.kind,
        statement.tables,
        statement.digest,
    )
    assert statement.digest == "sha256:" + hashlib.sha256(statement.text.encode()).hexdigest()


def test_two_spellings_of_one_statement_have_one_digest_and_two_statements_two() -> None:
    one = analysed(PG, "select * from tenants where id='a'")
    same = analysed(PG, "SELECT  *\nFROM TENANTS /* c */ WHERE id = 'a'")
    other = analysed(PG, "SELECT * FROM tenants WHERE id = 'b'")
    assert one.digest == same.digest != other.digest


TABLES = [
    (PG, "SELECT * FROM Tenants JOIN public.ROWS ON true", {Table(None, "tenants"), Table("public", "rows")}),
    (PG, 'SELECT * FROM "Tenants", "My Schema"."Rows"', {Table(None, "Tenants"), Table("My Schema", "Rows")}),
    (PG, 'SELECT * FROM "CAFÉ"', {Table(None, "CAFÉ")}),
    (PG, "WITH a AS (SELECT 1) SELECT * FROM a, b", {Table(None, "b")}),
    (PG, "SELECT * FROM a WHERE x IN (SELECT y FROM s.b)", {Table(None, "a"), Table("s", "b")}),
    (PG, "DROP TABLE s.a, b", {Table("s", "a"), Table(None, "b")}),
    (PG, "CREATE TABLE n (id int REFERENCES tenants)", {Table(None, "n"), Table(None, "tenants")}),
    (LITE, 'SELECT * FROM "Tenants" JOIN main.ROWS ON 1', {Table(None, "tenants"), Table("main", "rows")}),
    (LITE, "SELECT * FROM [My Table]", {Table(None, "my table")}),
    (LITE, "SELECT * FROM json_each('[1]'), t", {Table(None, "t")}),
]


@pytest.mark.parametrize(("dialect", "sql", "tables"), TABLES)
def test_the_tables_a_statement_touches_are_named_as_its_database_resolves_them(
    dialect: Dialect, sql: str, tables: set[Table]
) -> None:
    assert set(analysed(dialect, sql).tables) == tables


def test_a_tables_name_is_shown_quoted_where_the_database_needs_quotes() -> None:
    tables = analysed(PG, 'SELECT * FROM "Ta""b", s.t, "x y".z').tables
    assert sorted(str(table) for table in tables) == ['"Ta""b"', '"x y".z', "s.t"]


@pytest.mark.parametrize(
    ("dialect", "entries", "tables"),
    [
        (PG, ["tenants", "Public.Rows", '"Audit Log"'], {("tenants",), ("public", "rows"), ("Audit Log",)}),
        (
            LITE,
            ["tenants", "Main.Rows", '"Audit Log"', "[x]"],
            {("tenants",), ("main", "rows"), ("audit log",), ("x",)},
        ),
    ],
)
def test_allow_list_entries_are_read_by_the_dialects_own_name_rules(
    dialect: Dialect, entries: list[str], tables: set[tuple[str, ...]]
) -> None:
    assert {
        tuple(part for part in (table.schema, table.name) if part) for table in allowed_tables(dialect, entries)
    } == tables


@pytest.mark.parametrize("dialect", list(Dialect))
@pytest.mark.parametrize("entry", ["t; DROP TABLE t", "t AS x", "t, u", "a.b.c", "", "t WHERE true", "f()"])
def test_an_allow_list_entry_that_is_not_one_table_name_is_refused_naming_it(dialect: Dialect, entry: str) -> None:
    with pytest.raises(ValueError) as refused:
        allowed_tables(dialect, [entry])
    assert str(refused.value).startswith(repr(entry))


def measure(dialect: Dialect, sql: str) -> Measure:
    found = analysed(dialect, sql).measure
    assert found is not None
    return found


def test_a_delete_is_measured_by_counting_its_condition_and_fingerprinting_the_rows_it_would_touch() -> None:
    found = measure(PG, "DELETE FROM ONLY s.rows AS r WHERE r.tenant_id = 'tn_b'")
    assert found.unit == "rows matched" and found.given is None
    assert found.count_sql == "SELECT pg_catalog.count(*) FROM ONLY s.rows AS r WHERE r.tenant_id = 'tn_b'"
    assert found.fingerprint_sql is not None
    assert "pg_catalog.concat_ws(':', r.tableoid, r.ctid, r.xmin)" in found.fingerprint_sql
    assert found.fingerprint_sql.endswith("FROM ONLY s.rows AS r WHERE r.tenant_id = 'tn_b') AS affected")


def test_a_write_joined_to_other_tables_counts_each_target_row_once() -> None:
    for sql in (
        "DELETE FROM rows USING tenants WHERE rows.tenant_id = tenants.id",
        "UPDATE rows SET payload = '{}' FROM tenants WHERE rows.tenant_id = tenants.id",
    ):
        assert measure(PG, sql).count_sql == (
            "SELECT pg_catalog.count(*) FROM (SELECT DISTINCT rows.tableoid, rows.ctid FROM rows, tenants"
            " WHERE rows.tenant_id = tenants.id) AS affected"
        )
    assert measure(LITE, "UPDATE rows SET a = 1 FROM tenants WHERE rows.tenant_id = tenants.id").count_sql == (
        "SELECT COUNT(*) FROM (SELECT DISTINCT rows.rowid FROM rows, tenants WHERE rows.tenant_id = tenants.id)"
        " AS affected"
    )


def test_an_insert_is_measured_by_the_rows_it_gives_or_selects() -> None:
    assert measure(PG, "INSERT INTO rows (tenant_id) VALUES ('a'), ('b'), ('c')").given == 3
    assert measure(PG, "INSERT INTO rows DEFAULT VALUES").given == 1
    assert measure(LITE, "INSERT INTO rows (tenant_id) VALUES ('a'), ('b')").given == 2
    selected = measure(PG, "INSERT INTO audit_log (action) SELECT 'touch' FROM tenants WHERE protected")
    assert selected.count_sql == (
        "SELECT pg_catalog.count(*) FROM (SELECT 'touch' FROM tenants WHERE protected) AS source"
    )
    assert measure(LITE, "INSERT INTO t SELECT * FROM u WHERE x").count_sql == (
        "SELECT COUNT(*) FROM (SELECT * FROM u WHERE x) AS source"
    )


def test_emptying_or_dropping_tables_is_measured_by_their_rows() -> None:
    assert measure(PG, "TRUNCATE a, ONLY s.b").count_sql == (
        "SELECT (SELECT pg_catalog.count(*) FROM a) + (SELECT pg_catalog.count(*) FROM ONLY s.b)"
    )
    assert measure(PG, "DROP TABLE s.a").count_sql == "SELECT (SELECT pg_catalog.count(*) FROM s.a)"
    assert measure(LITE, "DROP TABLE a").count_sql == "SELECT (SELECT COUNT(*) FROM a)"
    assert measure(PG, "CREATE INDEX i ON rows (id)").given == 0
    assert measure(PG, "CREATE TABLE c AS SELECT * FROM rows WITH NO DATA").given == 0


def test_sqlite_offers_no_fingerprint_and_postgresql_one_for_every_read_measure() -> None:
    assert measure(LITE, "DELETE FROM rows WHERE id = 1").fingerprint_sql is None
    for sql in ("DELETE FROM rows WHERE id = 1", "UPDATE rows SET id = 2", "TRUNCATE rows", "DROP TABLE rows"):
        assert measure(PG, sql).fingerprint_sql is not None


def test_a_helper_in_a_measuring_read_cannot_be_shadowed_by_a_function_on_the_search_path() -> None:
    found = measure(PG, "DELETE FROM rows WHERE id = 1")
    assert found.fingerprint_sql is not None
    read = found.fingerprint_sql
    for helper in ("count", "md5", "string_agg", "concat_ws"):
        assert f"pg_catalog.{helper}(" in read
        assert f" {helper}(" not in read and f"({helper}(" not in read


def test_rules_refuse_to_allow_the_class_other() -> None:
    with pytest.raises(ValueError, match="other"):
        Rules(PG, classes=frozenset({READ, StatementClass.OTHER}))


def test_a_measure_is_given_or_read_never_both() -> None:
    with pytest.raises(ValueError):
        Measure(unit="rows", given=1, count_sql="SELECT 1")
    with pytest.raises(ValueError):
        Measure(unit="rows")


WORDS = [
    "SELECT", "DELETE", "UPDATE", "INSERT", "INTO", "VALUES", "SET", "FROM", "WHERE", "USING", "WITH", "AS", "ONLY",
    "JOIN", "RETURNING", "ON", "CONFLICT", "DO", "NOTHING", "TRUNCATE", "DROP", "TABLE", "CREATE", "ALTER", "ADD",
    "IN", "EXISTS", "NOT", "NULL", "IS", "ORDER", "BY", "LIMIT", "UNION", "FOR", "t", "u", "a", "1", "'x'", '"q"',
    "$$", "$t$", ";", "--", "/*", "*/", "(", ")", ",", "=", "random()", "count(*)", "E'\\\\'", "\u00e9", "\uff1b",
    "\n",
]  # fmt: skip


@settings(deadline=None)
@given(
    dialect=st.sampled_from(list(Dialect)),
    parts=st.lists(st.sampled_from(WORDS) | st.text(max_size=3), max_size=14),
)
def test_any_text_is_either_analysed_or_refused_with_a_reason(dialect: Dialect, parts: list[str]) -> None:
    rules = Rules(dialect, classes=EVERY_CLASS)
    try:
        statement = analyse(" ".join(parts), rules)
    except StatementRefused as refused:
        assert refused.sentence
        assert "the parser failed" not in refused.sentence  # the closed fallback is for bugs, not for inputs
        return
    assert ";" not in statement.text
    assert analyse(statement.text, rules).digest == statement.digest


def test_the_package_imports_only_its_parsers_the_standard_library_and_itself() -> None:
    package = ROOT / "gateway" / "statements"
    allowed = {"__future__", "pglast", "sqlglot", "gateway.statements"}
    stdlib = {
        "collections",
        "dataclasses",
        "enum",
        "functools",
        "hashlib",
        "importlib",
        "re",
        "sqlite3",
        "typing",
        "unicodedata",
    }
    for module in sorted(package.glob("*.py")):
        for node in ast.walk(ast.parse(module.read_text())):
            if isinstance(node, ast.Import | ast.ImportFrom):
                names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                for name in names:
                    top = name.split(".")[0]
                    assert top in stdlib or any(name == ok or name.startswith(ok + ".") for ok in allowed), (
                        f"{module.name} imports {name}"
                    )
