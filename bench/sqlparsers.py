"""Choosing a SQL parser for statement-executing backends: ``sqlglot`` and ``pglast`` side by side, in one run.

    .venv/bin/python bench/sqlparsers.py              (the project's venv: pglast and pure-Python sqlglot)
    bench/.venv-tools/bin/python bench/sqlparsers.py  (bench/run creates it with sqlglot[c], mypyc-compiled)

``sqlglot`` parses many dialects in pure Python (``sqlglot[c]`` overlays compiled modules); ``pglast`` binds
libpg_query, PostgreSQL's own lexer and grammar. Each analyses the same realistic statements (an agent's reads and
writes on a tenants / rows / audit_log schema): parse, classify, list the tables, and print the statement back (the
text a gateway would execute and show). It prints microseconds per statement, then three correctness findings:

- fidelity: how many printed-back statements PostgreSQL itself (libpg_query) reads as another tree than the
  original: such a statement would execute something other than what was written;
- a table of tricky statements per dialect: how many statements and which class each parser sees, beside the
  truth. For PostgreSQL the truth is libpg_query; for SQLite it is the SQLite library itself (the stdlib's
  ``sqlite3`` preparing the statement against the schema, its authorizer reporting every action);
- for SQLite, whether sqlglot's printed-back statement makes SQLite report the same actions as the original.
"""

from __future__ import annotations

import sqlite3
import statistics
import time
from collections.abc import Callable
from functools import partial
from importlib import metadata
from typing import Any

import pglast
import sqlglot
from pglast import ast as pg
from pglast import visitors
from pglast.stream import RawStream
from sqlglot import exp
from sqlglot import tokens as sqlglot_tokens

POSTGRES = [
    "SELECT id, name FROM tenants ORDER BY id LIMIT 20",
    "SELECT * FROM tenants WHERE id = 'tn_checkout01'",
    "select t.id, count(r.id) as n from tenants t left join rows r on r.tenant_id = t.id group by t.id "
    "order by n desc limit 10",
    "SELECT id FROM tenants WHERE name ILIKE '%shop%' AND NOT protected",
    "SELECT tenant_id, max(at) FROM audit_log WHERE at > now() - interval '7 days' GROUP BY tenant_id",
    "WITH recent AS (SELECT tenant_id FROM audit_log WHERE action = 'wipe') "
    "SELECT * FROM tenants WHERE id IN (SELECT tenant_id FROM recent)",
    "SELECT DISTINCT ON (tenant_id) tenant_id, id, created_at FROM rows ORDER BY tenant_id, created_at DESC",
    "SELECT id, payload->>'kind' AS kind FROM rows WHERE payload @> '{\"kind\": \"order\"}'::jsonb",
    "SELECT count(*) FILTER (WHERE protected) AS protected, count(*) FROM tenants",
    "SELECT id, row_number() OVER (PARTITION BY tenant_id ORDER BY id) FROM rows",
    "SELECT * FROM rows WHERE tenant_id = ANY(ARRAY['tn_a', 'tn_b']) AND id BETWEEN 10 AND 20",
    "SELECT coalesce(name, '(none)'), length(name)::int FROM tenants WHERE name IS NOT NULL",
    "SELECT t.* FROM tenants AS t WHERE EXISTS (SELECT 1 FROM rows r WHERE r.tenant_id = t.id)",
    "SELECT id FROM tenants UNION SELECT tenant_id FROM rows",
    "SELECT CASE WHEN protected THEN 'yes' ELSE 'no' END FROM tenants",
    "SELECT date_trunc('day', at) d, count(*) FROM audit_log GROUP BY 1 ORDER BY 1",
    'SELECT "Name" FROM public."Tenants" WHERE "Id" <> \'x\'',
    "SELECT upper(name), lower(name), substring(name from 1 for 3) FROM tenants",
    "SELECT extract(year FROM at) FROM audit_log",
    "SELECT cast(id AS text) || ':' || name FROM tenants",
    "SELECT * FROM tenants OFFSET 40 LIMIT 20",
    "INSERT INTO tenants (id, name) VALUES ('tn_new', 'New')",
    "INSERT INTO rows (tenant_id, payload) VALUES ('tn_a', '{}'), ('tn_a', '{}'), ('tn_b', '{}')",
    "INSERT INTO audit_log (tenant_id, action) SELECT id, 'touch' FROM tenants WHERE protected",
    "UPDATE tenants SET name = 'Renamed' WHERE id = 'tn_a'",
    "UPDATE tenants SET version = version + 1, name = upper(name) WHERE protected = false AND id LIKE 'tn_%'",
    "UPDATE rows SET payload = '{}'::jsonb FROM tenants WHERE rows.tenant_id = tenants.id AND tenants.protected",
    "DELETE FROM rows WHERE tenant_id = 'tn_b'",
    "DELETE FROM rows WHERE created_at < now() - interval '30 days'",
    "DELETE FROM rows r USING tenants t WHERE r.tenant_id = t.id AND t.name = 'Old'",
    "DELETE FROM audit_log WHERE tenant_id IN (SELECT id FROM tenants WHERE protected IS NOT TRUE)",
    "DELETE FROM rows",
    "TRUNCATE rows",
    "DROP TABLE rows",
    "CREATE TABLE notes (id serial PRIMARY KEY, body text NOT NULL)",
    "ALTER TABLE tenants ADD COLUMN region text DEFAULT 'eu'",
]
SQLITE = [
    "SELECT id, name FROM tenants ORDER BY id LIMIT 20",
    "SELECT * FROM tenants WHERE id = 'tn_checkout01'",
    "select t.id, count(r.id) as n from tenants t left join rows r on r.tenant_id = t.id group by t.id "
    "order by n desc limit 10",
    "SELECT id FROM tenants WHERE name LIKE '%shop%' AND NOT protected",
    "SELECT tenant_id, max(at) FROM audit_log WHERE at > datetime('now', '-7 days') GROUP BY tenant_id",
    "WITH recent AS (SELECT tenant_id FROM audit_log WHERE action = 'wipe') "
    "SELECT * FROM tenants WHERE id IN (SELECT tenant_id FROM recent)",
    "SELECT id, json_extract(payload, '$.kind') AS kind FROM rows WHERE payload ->> '$.kind' = 'order'",
    "SELECT count(*) FILTER (WHERE protected) AS protected, count(*) FROM tenants",
    "SELECT id, row_number() OVER (PARTITION BY tenant_id ORDER BY id) FROM rows",
    "SELECT coalesce(name, '(none)'), length(name), ifnull(name, '') FROM tenants WHERE name IS NOT NULL",
    "SELECT t.* FROM tenants AS t WHERE EXISTS (SELECT 1 FROM rows r WHERE r.tenant_id = t.id)",
    "SELECT id FROM tenants UNION SELECT tenant_id FROM rows",
    "SELECT CASE WHEN protected THEN 'yes' ELSE 'no' END, iif(protected, 1, 0) FROM tenants",
    "SELECT strftime('%Y-%m-%d', at) d, count(*) FROM audit_log GROUP BY 1 ORDER BY 1",
    'SELECT "Name" FROM main."Tenant Names" WHERE [Id] <> \'x\'',
    "SELECT upper(name), lower(name), substr(name, 1, 3), instr(name, 'a') FROM tenants",
    "SELECT * FROM tenants LIMIT 20 OFFSET 40",
    "SELECT total(version), group_concat(id, ',') FROM tenants",
    "INSERT INTO tenants (id, name) VALUES ('tn_new', 'New')",
    "INSERT INTO rows (tenant_id, payload) VALUES ('tn_a', '{}'), ('tn_a', '{}'), ('tn_b', '{}')",
    "INSERT INTO audit_log (tenant_id, action) SELECT id, 'touch' FROM tenants WHERE protected",
    "UPDATE tenants SET name = 'Renamed' WHERE id = 'tn_a'",
    "UPDATE tenants SET version = version + 1, name = upper(name) WHERE protected = 0 AND id LIKE 'tn_%'",
    "UPDATE rows SET payload = '{}' FROM tenants WHERE rows.tenant_id = tenants.id AND tenants.protected",
    "DELETE FROM rows WHERE tenant_id = 'tn_b'",
    "DELETE FROM rows WHERE created_at < datetime('now', '-30 days')",
    "DELETE FROM audit_log WHERE tenant_id IN (SELECT id FROM tenants WHERE protected IS NOT 1)",
    "DELETE FROM rows",
    "DROP TABLE rows",
    "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL)",
    "ALTER TABLE tenants ADD COLUMN region TEXT DEFAULT 'eu'",
]
SQLITE_SCHEMA = """
CREATE TABLE tenants (id TEXT PRIMARY KEY, name TEXT, protected INTEGER DEFAULT 0, version INTEGER DEFAULT 1);
CREATE TABLE "Tenant Names" ("Id" TEXT, "Name" TEXT);
CREATE TABLE rows (id INTEGER PRIMARY KEY, tenant_id TEXT, payload TEXT, created_at TEXT);
CREATE TABLE audit_log (id INTEGER PRIMARY KEY, tenant_id TEXT, action TEXT, at TEXT);
INSERT INTO tenants VALUES ('tn_a', 'A shop', 0, 1), ('tn_b', NULL, 1, 3);
INSERT INTO rows (tenant_id, payload, created_at) VALUES ('tn_a', '{"kind": "order"}', '2020-01-01');
"""
TRICKY = {
    "postgres": [
        "SELECT 1; DELETE FROM rows",
        "SELECT 'x; DELETE FROM rows; --'",
        "SELECT E'a\\'; DELETE FROM rows; --'",
        "SELECT $t$ ; DELETE FROM rows; $t$",
        "SELECT 1 /* /* */ ; DELETE FROM rows; */",
        "SELECT 1 -- ; DELETE FROM rows",
        "SELECT 1 \uff1bDELETE FROM rows",  # a fullwidth semicolon
        "WITH d AS (DELETE FROM rows RETURNING *) SELECT * FROM d",
        "SELECT * INTO copy FROM rows",
        "SELECT * FROM rows FOR UPDATE",
        "COPY rows TO PROGRAM 'true'",
        "DO $$ BEGIN DELETE FROM rows; END $$",
        "CALL wipe()",
        "EXPLAIN ANALYZE DELETE FROM rows",
        "CREATE TABLE copy AS SELECT * FROM rows",
        "SET ROLE postgres",
        "LISTEN channel",
        "NOTIFY channel",
        "VACUUM rows",
        "PREPARE p AS DELETE FROM rows",
        "EXECUTE p",
        'SELECT "select" FROM "delete"',
        "DELETE FROM ONLY rows WHERE id = 1",
        "UPDATE rows SET id = 1 FROM tenants WHERE rows.tenant_id = tenants.id",
    ],
    "sqlite": [
        "SELECT 1; DELETE FROM rows",
        "SELECT 'x; DELETE FROM rows; --'",
        "SELECT [x;y] FROM rows",
        "SELECT 1 /* /* */ ; DELETE FROM rows; */",
        "SELECT 1 -- ; DELETE FROM rows",
        "SELECT 1 \uff1bDELETE FROM rows",  # a fullwidth semicolon
        "WITH d AS (SELECT id FROM rows) DELETE FROM rows WHERE id IN (SELECT id FROM d)",
        "REPLACE INTO tenants (id, name) VALUES ('tn_a', 'A')",
        "INSERT OR REPLACE INTO tenants (id, name) VALUES ('tn_a', 'A')",
        "SELECT load_extension('x')",
        "ATTACH DATABASE ':memory:' AS other",
        "PRAGMA writable_schema = 1",
        "VACUUM",
        "CREATE TRIGGER tr AFTER INSERT ON rows BEGIN DELETE FROM tenants; END",
        "DELETE FROM rows WHERE id = 1 RETURNING *",
        'SELECT "select" FROM "rows"',
    ],
}
ROUNDS = 7


def pglast_analysis(sql: str) -> tuple[int, str, list[str], str]:
    """Statements, class of the first, its tables, and the first printed back, all by libpg_query."""
    parsed = pglast.parse_sql(sql)
    first = parsed[0].stmt
    assert first is not None
    tables = [
        f"{node.schemaname}.{node.relname}" if node.schemaname else str(node.relname)
        for _, node in visitors.Visitor().iterate(first)
        if isinstance(node, pg.RangeVar)
    ]
    return len(parsed), type(first).__name__, tables, RawStream()(first)


def sqlglot_analysis(sql: str, dialect: str) -> tuple[int, str, list[str], str]:
    """The same by sqlglot: statements (empty trailing ones dropped), class, tables, printed back."""
    parsed = [tree for tree in sqlglot.parse(sql, dialect=dialect) if tree is not None]
    first = parsed[0]
    tables = [table.sql(dialect=dialect) for table in first.find_all(exp.Table)]
    return len(parsed), type(first).__name__, tables, first.sql(dialect=dialect, comments=False)


def per_statement_us(analyse: Callable[[str], Any], statements: list[str]) -> float:
    """The median over ROUNDS of the mean time to analyse one statement of the set, in microseconds."""
    rounds = []
    for _ in range(ROUNDS):
        started = time.perf_counter()
        for sql in statements:
            analyse(sql)
        rounds.append((time.perf_counter() - started) / len(statements))
    return statistics.median(rounds) * 1e6


def changed_by_printing(statements: list[str], printed: Callable[[str], str]) -> list[str]:
    """The statements whose printed-back text libpg_query parses into another tree than the original."""
    return [sql for sql in statements if pglast.parse_sql(printed(sql)) != pglast.parse_sql(sql)]


def sqlite_truth(sql: str) -> tuple[str, list[tuple[Any, ...]]]:
    """What SQLite itself makes of a statement: how many it is and the actions its authorizer reports."""
    connection = sqlite3.connect(":memory:")
    connection.executescript(SQLITE_SCHEMA)
    actions: list[tuple[Any, ...]] = []

    def authorizer(action: int, *names: str | None) -> int:
        actions.append((AUTHORIZER_ACTIONS.get(action, action), *names))
        return sqlite3.SQLITE_OK

    connection.set_authorizer(authorizer)
    try:
        connection.execute(f"EXPLAIN {sql}")
    except sqlite3.ProgrammingError as exc:
        return ("2+" if "one statement" in str(exc) else f"error: {exc}"), []
    except sqlite3.Error as exc:  # past the grammar, a name it cannot resolve: still one statement
        return ("-" if "syntax error" in str(exc) or "incomplete input" in str(exc) else "1"), []
    finally:
        connection.close()
    return "1", actions


ACTION_NAMES = (
    "ALTER_TABLE ANALYZE ATTACH CREATE_INDEX CREATE_TABLE CREATE_TEMP_INDEX CREATE_TEMP_TABLE CREATE_TEMP_TRIGGER "
    "CREATE_TEMP_VIEW CREATE_TRIGGER CREATE_VIEW CREATE_VTABLE DELETE DETACH DROP_INDEX DROP_TABLE DROP_TEMP_INDEX "
    "DROP_TEMP_TABLE DROP_TEMP_TRIGGER DROP_TEMP_VIEW DROP_TRIGGER DROP_VIEW DROP_VTABLE FUNCTION INSERT PRAGMA READ "
    "RECURSIVE REINDEX SAVEPOINT SELECT TRANSACTION UPDATE"
)
AUTHORIZER_ACTIONS = {getattr(sqlite3, f"SQLITE_{name}"): name.lower() for name in ACTION_NAMES.split()}


def opinion(work: Callable[[], tuple[int, str, list[str], str]]) -> tuple[str, str]:
    """How many statements a parser sees, and the class of the first (or the exception it raised)."""
    try:
        count, kind, _, _ = work()
    except Exception as exc:  # the failure is the finding
        return "-", type(exc).__name__
    return str(count), kind


def keeps_tree(sql: str) -> str:
    """Whether libpg_query reads sqlglot's printed-back statement as the original's tree."""
    try:
        return "kept" if not changed_by_printing([sql], lambda sql: sqlglot_analysis(sql, "postgres")[3]) else "CHANGED"
    except Exception as exc:  # the failure is the finding
        return type(exc).__name__


def main() -> None:
    build = "compiled, sqlglot[c]" if sqlglot_tokens.SQLGLOTC_INSTALLED else "pure Python"
    print(f"sqlglot {metadata.version('sqlglot')} ({build}), pglast {metadata.version('pglast')}")
    print(f"  PostgreSQL grammar of pglast: {'.'.join(map(str, pglast.parser.get_postgresql_version()))}")
    print("microseconds per statement (parse, classify, tables, print back; median of rounds):")
    timings = {
        f"pglast, postgres ({len(POSTGRES)}), parse only": per_statement_us(pglast.parse_sql, POSTGRES),
        f"sqlglot, postgres ({len(POSTGRES)}), parse only": per_statement_us(
            partial(sqlglot.parse, dialect="postgres"), POSTGRES
        ),
        f"pglast, postgres ({len(POSTGRES)})": per_statement_us(pglast_analysis, POSTGRES),
        f"sqlglot, postgres ({len(POSTGRES)})": per_statement_us(
            partial(sqlglot_analysis, dialect="postgres"), POSTGRES
        ),
        f"sqlglot, sqlite ({len(SQLITE)})": per_statement_us(partial(sqlglot_analysis, dialect="sqlite"), SQLITE),
    }
    for label, took in timings.items():
        print(f"  {label:40} {took:8.1f}")
    print("fidelity: printed-back statements PostgreSQL reads as another tree than the original:")
    by_sqlglot = changed_by_printing(POSTGRES, lambda sql: sqlglot_analysis(sql, "postgres")[3])
    by_pglast = changed_by_printing(POSTGRES, lambda sql: pglast_analysis(sql)[3])
    print(f"  sqlglot {len(by_sqlglot)} of {len(POSTGRES)}, pglast {len(by_pglast)} of {len(POSTGRES)}")
    for sql in by_sqlglot:
        print(f"    {sql}\n      -> {sqlglot_analysis(sql, 'postgres')[3]}")
    print("tricky statements, postgres: sqlglot (statements, node, printed back) | libpg_query, the truth")
    for sql in TRICKY["postgres"]:
        (count, kind), (truth, truth_kind) = (
            opinion(partial(sqlglot_analysis, sql, "postgres")),
            opinion(partial(pglast_analysis, sql)),
        )
        mark = "  " if count == truth else "!="
        kept = keeps_tree(sql) if count == "1" else ""
        print(f"  {mark} {sql[:56]!r:58} {count} {kind:12} {kept:10} | {truth} {truth_kind}")
    print("tricky statements, sqlite: sqlglot (statements, node) | SQLite itself (statements, first actions)")
    for sql in TRICKY["sqlite"]:
        count, kind = opinion(partial(sqlglot_analysis, sql, "sqlite"))
        truth, actions = sqlite_truth(sql)
        mark = "  " if count == truth or (count.isdigit() and int(count) > 1 and truth == "2+") else "!="
        print(f"  {mark} {sql[:56]!r:58} {count} {kind:12} | {truth} {[action[0] for action in actions][:4]}")
    changed = []
    for sql in SQLITE:
        printed = sqlglot_analysis(sql, "sqlite")[3]
        if sqlite_truth(printed) != sqlite_truth(sql):
            changed.append((sql, printed))
    print(
        f"sqlite fidelity: sqlglot's printed-back statements with other SQLite actions: {len(changed)} of {len(SQLITE)}"
    )
    for sql, printed in changed:
        print(f"    {sql}\n      -> {printed}")


if __name__ == "__main__":
    main()
