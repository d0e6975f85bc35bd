"""Statements written to get a write past a statement-executing tool, one row each: what the analysis answers.

Each row is ``(dialect, statement, answer)``: the refusal reason, or the class of a statement that is let through
(then the normalised text, which is what would run, is checked to hold nothing hidden). To add an attack, add a
row. Rows are grouped by the trick they try; the rules are the defaults (reads and row writes, every table)
unless a group says otherwise.
"""

from __future__ import annotations

import pytest

from gateway.statements.analysis import allowed_tables, analyse
from gateway.statements.model import DDL, DELETE, INSERT, READ, TRUNCATE, UPDATE, Dialect, StatementClass
from gateway.statements.refusals import Refusal, StatementRefused
from gateway.statements.rules import DEFAULT_CLASSES, Rules

PG, LITE = Dialect.POSTGRES, Dialect.SQLITE
R = Refusal
Row = tuple[Dialect, str, Refusal | StatementClass]

SEVERAL_STATEMENTS: list[Row] = [
    (PG, "SELECT 1; DELETE FROM rows", R.SEVERAL_STATEMENTS),
    (PG, "SELECT 1;DELETE FROM rows;", R.SEVERAL_STATEMENTS),
    (PG, "DELETE FROM rows WHERE id = 1;", DELETE),  # one statement and its terminator
    (PG, "SELECT 1 -- ; DELETE FROM rows", READ),  # the DELETE is inside a comment: nothing of it runs
    (PG, "SELECT 1 /* ; DELETE FROM rows */", READ),
    (PG, "SELECT 1 /* /* */ ; DELETE FROM rows; */", READ),  # PostgreSQL nests comments: all one comment
    (PG, "SELECT 1 /* /* */ ; DELETE FROM rows", R.UNPARSABLE),  # ... so this comment never ends
    (PG, "SELECT 'x; DELETE FROM rows; --'", R.SEMICOLON),
    (PG, "SELECT E'a\\'; DELETE FROM rows; --'", R.SEMICOLON),
    (PG, "SELECT E'\\'; DELETE FROM rows; SELECT \\'' AS x", R.SEMICOLON),  # dbhub's splitter cuts after E'\'
    (PG, "SELECT $$ ; DELETE FROM rows; $$", R.SEMICOLON),
    (PG, "SELECT $t$ ; DELETE FROM rows; $t$", R.SEMICOLON),
    (PG, "SELECT $t$x$t$ AS a", READ),
    (PG, 'SELECT 1 AS "a;b"', R.SEMICOLON),
    (PG, "SELECT 1 \uff1bDELETE FROM rows", R.LOOKALIKE_CHARACTERS),  # fullwidth semicolon
    (PG, "SELECT 1 \ufe54 DELETE FROM rows", R.LOOKALIKE_CHARACTERS),  # small semicolon
    (PG, "SELECT 1 \u037e DELETE FROM rows", R.LOOKALIKE_CHARACTERS),  # Greek question mark
    (PG, "SELECT \u2018x\u2019", R.LOOKALIKE_CHARACTERS),  # curly quotes
    (PG, "SELECT \u02bcx\u02bc", R.LOOKALIKE_CHARACTERS),  # modifier letter apostrophe
    (PG, "SELECT\u00a01", R.LOOKALIKE_CHARACTERS),  # no-break space
    (PG, "SELECT 1\x00; DELETE FROM rows", R.HIDDEN_CHARACTERS),  # libpq would stop at the NUL
    (PG, "DELETE FROM rows WHERE id = 1\x00 OR true", R.HIDDEN_CHARACTERS),
    (PG, "SELECT 1 -- \u202e ;DELETE", R.HIDDEN_CHARACTERS),  # a right-to-left override
    (PG, "SELECT E'\\x01'", R.HIDDEN_CHARACTERS),  # a control character appears only once printed
    (PG, "SELECT 'caf\u00e9', \"na\u00efve\"", READ),  # other letters in strings and quoted names are data
    (PG, "SELECT 'a\\b'", R.AMBIGUOUS_STRING),  # with standard_conforming_strings off: a backspace
    (PG, "SELECT E'\\\\'", R.AMBIGUOUS_STRING),  # prints as '\', which swallows the quote when it is off
    (PG, "", R.EMPTY),
    (PG, "-- nothing", R.EMPTY),
    (PG, "SELEC 1", R.UNPARSABLE),
    (LITE, "SELECT 1; DELETE FROM rows", R.SEVERAL_STATEMENTS),
    (LITE, "DELETE FROM rows WHERE id = 1;", DELETE),
    (LITE, "SELECT 1 -- ; DELETE FROM rows", READ),
    (LITE, "SELECT 1 /* ; DELETE FROM rows */", READ),
    (LITE, "SELECT 1 /* /* */ ; DELETE FROM rows", R.SEVERAL_STATEMENTS),  # SQLite does not nest comments
    (LITE, "SELECT 'x; DELETE FROM rows; --'", R.SEMICOLON),
    (LITE, "SELECT [a;b] FROM rows", R.SEMICOLON),
    (LITE, "SELECT `a;b` FROM rows", R.SEMICOLON),
    (LITE, "SELECT 1 \uff1bDELETE FROM rows", R.LOOKALIKE_CHARACTERS),
    (LITE, "SELECT 1 -- caf\u00e9", R.LOOKALIKE_CHARACTERS),  # no comment positions from sqlglot: refused
    (LITE, "SELECT 1\x00; DELETE FROM rows", R.HIDDEN_CHARACTERS),
    (LITE, "CREATE TRIGGER tr AFTER INSERT ON rows BEGIN DELETE FROM tenants; END", R.SEVERAL_STATEMENTS),
    (LITE, "SELECT 1" + ";" * 65, R.SEVERAL_STATEMENTS),
]
HIDDEN_WRITES: list[Row] = [
    (PG, "WITH d AS (DELETE FROM rows RETURNING *) SELECT * FROM d", R.HIDDEN_WRITE),
    (PG, "WITH u AS (UPDATE rows SET id = id RETURNING 1) SELECT count(*) FROM u", R.HIDDEN_WRITE),
    (PG, "WITH i AS (INSERT INTO rows DEFAULT VALUES RETURNING 1) SELECT 1", R.HIDDEN_WRITE),
    (PG, "SELECT * INTO copy FROM rows", R.HIDDEN_WRITE),
    (PG, "SELECT * FROM rows FOR UPDATE", R.HIDDEN_WRITE),
    (PG, "SELECT * FROM rows FOR NO KEY UPDATE SKIP LOCKED", R.HIDDEN_WRITE),
    (PG, "SELECT * FROM (SELECT * FROM rows FOR SHARE) AS s", R.HIDDEN_WRITE),
    (PG, "DELETE FROM rows WHERE id IN (SELECT id FROM rows FOR UPDATE SKIP LOCKED)", R.HIDDEN_WRITE),
    (PG, "EXPLAIN ANALYZE DELETE FROM rows", R.HIDDEN_WRITE),  # EXPLAIN ANALYZE runs the DELETE
    (PG, "EXPLAIN SELECT 1", R.CLASS_NOT_ALLOWED),
    (PG, "COPY rows TO PROGRAM 'rm -rf /'", R.CLASS_NOT_ALLOWED),
    (PG, "COPY rows FROM '/etc/passwd'", R.CLASS_NOT_ALLOWED),
    (PG, "DO $$ BEGIN DELETE FROM rows; END $$", R.CLASS_NOT_ALLOWED),
    (PG, "CALL wipe_all()", R.CLASS_NOT_ALLOWED),
    (PG, "CREATE TABLE copy AS SELECT * FROM rows", R.CLASS_NOT_ALLOWED),
    (PG, "SET ROLE postgres", R.CLASS_NOT_ALLOWED),
    (PG, "SET search_path TO evil, public", R.CLASS_NOT_ALLOWED),
    (PG, "RESET ALL", R.CLASS_NOT_ALLOWED),
    (PG, "LISTEN channel", R.CLASS_NOT_ALLOWED),
    (PG, "NOTIFY channel, 'x'", R.CLASS_NOT_ALLOWED),
    (PG, "VACUUM FULL rows", R.CLASS_NOT_ALLOWED),
    (PG, "ANALYZE rows", R.CLASS_NOT_ALLOWED),
    (PG, "PREPARE p AS DELETE FROM rows", R.HIDDEN_WRITE),
    (PG, "EXECUTE p", R.CLASS_NOT_ALLOWED),
    (PG, "BEGIN", R.CLASS_NOT_ALLOWED),
    (PG, "GRANT ALL ON rows TO PUBLIC", R.CLASS_NOT_ALLOWED),
    (PG, "CREATE FUNCTION f() RETURNS int AS 'SELECT 1' LANGUAGE sql", R.CLASS_NOT_ALLOWED),
    (PG, "CREATE RULE r AS ON SELECT TO rows DO INSTEAD DELETE FROM tenants", R.HIDDEN_WRITE),
    (PG, "LOCK TABLE rows", R.CLASS_NOT_ALLOWED),
    (PG, "MERGE INTO rows USING tenants ON false WHEN NOT MATCHED THEN DO NOTHING", R.CLASS_NOT_ALLOWED),
    (LITE, "ATTACH DATABASE '/tmp/other.db' AS other", R.CLASS_NOT_ALLOWED),
    (LITE, "PRAGMA writable_schema = 1", R.CLASS_NOT_ALLOWED),
    (LITE, "VACUUM INTO '/tmp/copy.db'", R.NOT_UNDERSTOOD),
    (LITE, "REPLACE INTO tenants (id) VALUES ('tn_a')", R.NOT_UNDERSTOOD),
    (LITE, "BEGIN", R.CLASS_NOT_ALLOWED),
    (LITE, "VALUES (1)", R.CLASS_MISMATCH),  # sqlglot models VALUES as a table, not a query
    (LITE, "LISTEN channel", R.CLASS_NOT_ALLOWED),  # sqlglot reads a column with an alias; still not a read
]
FUNCTIONS: list[Row] = [
    (PG, "SELECT nextval('s')", R.FUNCTION_NOT_ALLOWED),
    (PG, "SELECT pg_catalog.setval('s', 1)", R.FUNCTION_NOT_ALLOWED),
    (PG, "SELECT \"nextval\"('s')", R.FUNCTION_NOT_ALLOWED),
    (PG, "SELECT NEXTVAL('s')", R.FUNCTION_NOT_ALLOWED),
    (PG, "SELECT * FROM nextval('s')", R.FUNCTION_NOT_ALLOWED),
    (PG, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity", R.FUNCTION_NOT_ALLOWED),
    (PG, "SELECT lo_unlink(16384)", R.FUNCTION_NOT_ALLOWED),
    (PG, "SELECT set_config('role', 'postgres', false)", R.FUNCTION_NOT_ALLOWED),
    (PG, "SELECT query_to_xml('DELETE FROM rows RETURNING 1', true, false, '')", R.FUNCTION_NOT_ALLOWED),
    (PG, "SELECT table_to_xml('secrets', true, false, '')", R.FUNCTION_NOT_ALLOWED),
    (PG, "SELECT dblink_exec('dbname=postgres', 'DELETE FROM rows')", R.FUNCTION_NOT_ALLOWED),
    (PG, "SELECT pg_read_file('/etc/passwd')", R.FUNCTION_NOT_ALLOWED),
    (PG, "SELECT 1 WHERE EXISTS (SELECT pg_advisory_lock(1))", R.FUNCTION_NOT_ALLOWED),
    (PG, "UPDATE rows SET id = nextval('s') WHERE id = 1", R.FUNCTION_NOT_ALLOWED),
    (PG, "SELECT count(*), max(id), lower('X'), now() FROM rows", READ),
    (LITE, "SELECT load_extension('/tmp/evil.so')", R.FUNCTION_NOT_ALLOWED),
    (LITE, "SELECT writefile('/tmp/x', 'y')", R.FUNCTION_NOT_ALLOWED),
    (LITE, "SELECT my_app_function(1)", R.FUNCTION_NOT_ALLOWED),  # registered by the application: unknown
    (LITE, "SELECT count(*), ifnull(max(id), 0), datetime('now'), total(id) FROM rows", READ),
]
NAMES_AND_KEYWORDS: list[Row] = [
    (PG, 'SELECT "select" FROM "delete"', READ),
    (PG, 'DELETE FROM "select" WHERE "where" = 1', DELETE),
    (PG, "SELECT 1 AS delete", READ),
    (PG, 'UPDATE "DELETE" SET "drop" = 1', UPDATE),
    (LITE, 'SELECT "select" FROM "delete"', READ),
    (LITE, "SELECT [delete] FROM [drop]", READ),
]
WRITES: list[Row] = [
    (PG, "INSERT INTO rows (tenant_id) VALUES ('tn_a')", INSERT),
    (PG, "UPDATE rows SET payload = '{}' WHERE id = 1", UPDATE),
    (PG, "DELETE FROM rows", DELETE),  # a DELETE with no WHERE is allowed; its measure is every row
    (PG, "TRUNCATE rows", R.CLASS_NOT_ALLOWED),
    (PG, "DROP TABLE rows", R.CLASS_NOT_ALLOWED),
    (PG, "ALTER TABLE rows ADD COLUMN x int", R.CLASS_NOT_ALLOWED),
    (PG, "UPDATE rows SET id = 1 RETURNING *", R.NOT_MEASURABLE),
    (PG, "DELETE FROM rows WHERE random() < 0.5", R.NOT_MEASURABLE),
    (PG, "DELETE FROM rows WHERE id IN (SELECT id FROM rows TABLESAMPLE SYSTEM (10))", R.NOT_MEASURABLE),
    (PG, "INSERT INTO tenants (id) VALUES ('tn_a') ON CONFLICT (id) DO UPDATE SET name = 'x'", R.NOT_MEASURABLE),
    (PG, "INSERT INTO tenants (id) VALUES ('tn_a') ON CONFLICT DO NOTHING", R.NOT_MEASURABLE),
    (PG, "WITH x AS (SELECT 1 AS id) DELETE FROM rows WHERE id IN (SELECT id FROM x)", R.NOT_MEASURABLE),
    (PG, "DELETE FROM rows WHERE CURRENT OF c", R.NOT_MEASURABLE),
    (PG, "INSERT INTO rows SELECT * FROM rows ORDER BY random() LIMIT 1", R.NOT_MEASURABLE),
    (LITE, "INSERT OR REPLACE INTO tenants (id) VALUES ('tn_a')", R.NOT_MEASURABLE),
    (LITE, "INSERT OR IGNORE INTO tenants (id) VALUES ('tn_a')", R.NOT_MEASURABLE),
    (LITE, "DELETE FROM rows ORDER BY id LIMIT 1", R.NOT_MEASURABLE),
    (LITE, "DELETE FROM rows WHERE random() % 2 = 0", R.NOT_MEASURABLE),
    (LITE, "DELETE FROM rows WHERE id = 1 RETURNING *", R.NOT_MEASURABLE),
]
TABLES = frozenset({"tenants", "rows", "audit_log"})
OUTSIDE_THE_ALLOW_LIST: list[Row] = [
    (PG, "SELECT * FROM secrets", R.TABLE_NOT_ALLOWED),
    (PG, "SELECT * FROM tenants, secrets", R.TABLE_NOT_ALLOWED),
    (PG, "SELECT (SELECT count(*) FROM secrets) FROM tenants", R.TABLE_NOT_ALLOWED),
    (PG, "WITH tenants AS (SELECT * FROM secrets) SELECT * FROM tenants", R.TABLE_NOT_ALLOWED),
    (PG, "WITH secrets AS (SELECT * FROM secrets) SELECT * FROM secrets", R.TABLE_NOT_ALLOWED),
    (PG, "WITH s AS (SELECT 1) SELECT * FROM tenants, s", READ),  # a WITH query's name is not a table
    (PG, "WITH a AS (SELECT * FROM b), b AS (SELECT 1) SELECT * FROM a", R.TABLE_NOT_ALLOWED),  # b: a table
    (PG, "WITH RECURSIVE a AS (SELECT 1 UNION SELECT 1 FROM a) SELECT * FROM a", READ),
    (PG, "SELECT * FROM other.tenants", R.TABLE_NOT_ALLOWED),
    (PG, "SELECT * FROM public.tenants", R.TABLE_NOT_ALLOWED),  # the allow-list names tenants, not public.*
    (PG, 'SELECT * FROM "Tenants"', R.TABLE_NOT_ALLOWED),  # quoted: another table than tenants
    (PG, "SELECT * FROM TENANTS", READ),  # unquoted: folded to tenants
    (PG, "SELECT * FROM otherdb.public.tenants", R.NOT_UNDERSTOOD),
    (PG, "DELETE FROM rows USING secrets WHERE rows.id = secrets.id", R.TABLE_NOT_ALLOWED),
    (PG, "INSERT INTO audit_log SELECT * FROM secrets", R.TABLE_NOT_ALLOWED),
    (LITE, "SELECT * FROM secrets", R.TABLE_NOT_ALLOWED),
    (LITE, 'SELECT * FROM "TENANTS"', READ),  # SQLite: quoted or not, case does not matter
    (LITE, "WITH tenants AS (SELECT * FROM secrets) SELECT * FROM tenants", R.TABLE_NOT_ALLOWED),
    (LITE, "SELECT * FROM other.tenants", R.TABLE_NOT_ALLOWED),
]
SCHEMA_CHANGES_ALLOWED: list[Row] = [
    (PG, "TRUNCATE rows", TRUNCATE),
    (PG, "TRUNCATE rows CASCADE", R.NOT_MEASURABLE),
    (PG, "DROP TABLE rows", DDL),
    (PG, "DROP TABLE rows CASCADE", R.NOT_MEASURABLE),
    (PG, "DROP VIEW v", R.NOT_MEASURABLE),
    (PG, "CREATE TABLE copy AS SELECT * FROM rows", DDL),
    (PG, "CREATE TABLE notes (id serial PRIMARY KEY, body text)", DDL),
    (PG, "ALTER TABLE rows ADD COLUMN x int", DDL),
    (PG, "SELECT * INTO copy FROM rows", R.HIDDEN_WRITE),  # even where DDL is allowed: say CREATE TABLE AS
    (LITE, "DROP TABLE rows", DDL),
    (LITE, "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)", DDL),
]


def check(row: Row, rules: Rules) -> None:
    _, sql, answer = row
    if isinstance(answer, Refusal):
        with pytest.raises(StatementRefused) as refused:
            analyse(sql, rules)
        assert refused.value.reason == answer, refused.value.sentence
        assert refused.value.sentence
        return
    statement = analyse(sql, rules)
    assert statement.kind == answer
    assert ";" not in statement.text and "--" not in statement.text and "/*" not in statement.text


def ids(rows: list[Row]) -> list[str]:
    return [f"{dialect}:{sql[:60]!r}" for dialect, sql, _ in rows]


@pytest.mark.parametrize("row", SEVERAL_STATEMENTS, ids=ids(SEVERAL_STATEMENTS))
def test_a_second_statement_is_refused_however_it_is_hidden(row: Row) -> None:
    check(row, Rules(row[0]))


@pytest.mark.parametrize("row", HIDDEN_WRITES, ids=ids(HIDDEN_WRITES))
def test_a_write_hidden_in_a_read_or_a_command_is_refused(row: Row) -> None:
    check(row, Rules(row[0]))


@pytest.mark.parametrize("row", FUNCTIONS, ids=ids(FUNCTIONS))
def test_a_function_that_writes_or_reaches_outside_is_refused(row: Row) -> None:
    check(row, Rules(row[0]))


@pytest.mark.parametrize("row", NAMES_AND_KEYWORDS, ids=ids(NAMES_AND_KEYWORDS))
def test_a_name_spelled_like_a_keyword_is_a_name(row: Row) -> None:
    check(row, Rules(row[0]))


@pytest.mark.parametrize("row", WRITES, ids=ids(WRITES))
def test_a_write_is_let_through_only_where_its_effect_can_be_measured(row: Row) -> None:
    check(row, Rules(row[0]))


@pytest.mark.parametrize("row", OUTSIDE_THE_ALLOW_LIST, ids=ids(OUTSIDE_THE_ALLOW_LIST))
def test_a_table_outside_the_allow_list_is_refused_wherever_it_is_named(row: Row) -> None:
    check(row, Rules(row[0], tables=allowed_tables(row[0], TABLES)))


@pytest.mark.parametrize("row", SCHEMA_CHANGES_ALLOWED, ids=ids(SCHEMA_CHANGES_ALLOWED))
def test_where_ddl_and_truncate_are_allowed_they_are_still_measured(row: Row) -> None:
    check(row, Rules(row[0], classes=DEFAULT_CLASSES | {DDL, TRUNCATE}))


@pytest.mark.parametrize("dialect", list(Dialect))
def test_a_function_the_config_marks_as_writing_is_refused_in_any_schema_and_case(dialect: Dialect) -> None:
    rules = Rules(dialect, writing_functions=frozenset({"audit_touch", "public.stamp"}))
    for sql in ("SELECT audit_touch()", "SELECT Audit_Touch(1)", "SELECT stamp()"):
        with pytest.raises(StatementRefused) as refused:
            analyse(sql, rules)
        assert refused.value.reason == Refusal.FUNCTION_NOT_ALLOWED


@pytest.mark.parametrize("dialect", list(Dialect))
def test_a_statement_past_the_size_limit_is_refused_before_any_parser_sees_it(dialect: Dialect) -> None:
    rules = Rules(dialect, max_length=40)
    assert analyse("SELECT id FROM rows WHERE id = 1", rules).kind == READ
    with pytest.raises(StatementRefused) as refused:
        analyse("SELECT id FROM rows WHERE id = 1 OR id = 2 OR id = 3", rules)
    assert refused.value.reason == Refusal.TOO_LONG


@pytest.mark.parametrize("dialect", list(Dialect))
def test_a_write_sent_where_a_read_is_taken_is_not_a_read_and_the_other_way_round(dialect: Dialect) -> None:
    rules = Rules(dialect)
    with pytest.raises(StatementRefused) as refused:
        analyse("DELETE FROM rows WHERE id = 1", rules, expect="read")
    assert refused.value.reason == Refusal.NOT_A_READ
    with pytest.raises(StatementRefused) as refused:
        analyse("SELECT 1", rules, expect="write")
    assert refused.value.reason == Refusal.NOT_A_WRITE
    assert analyse("SELECT 1", rules, expect="read").kind == READ
