"""PostgreSQL statements, read by libpg_query (pglast): PostgreSQL's own lexer and grammar, so no second parser
can disagree with the server about where a string, a comment or a statement ends.

What it finds (gateway.statements.model.Syntax): the class from the top node, every table (postgres_tree), every
function called, writes hidden in a read, the measure of a write (postgres_measure), and the normalised text:
pglast's printer, which libpg_query reads back to the same tree (comments dropped, dollar quoting, ``E''`` and
``U&''`` strings spelled as plain strings, names quoted where they must be).

Two things the server decides that the text does not say, both refused here:
- a backslash in a string: with ``standard_conforming_strings`` off (a per-database or per-role setting) the
  printed ``'a\\'`` would swallow the quote after it;
- a name with a database in front (``db.schema.table``).

Built-in writing functions (``WRITING``): a function a read must not call because it changes data or the server,
reaches outside the database (files, other servers), runs SQL given as text, or reads a table named by a string
(around the table allow-list). A config adds its own (user-defined functions are invisible to a parser).

No parser sees inside a view, a trigger, an operator or a cast: a read that reaches a writing function through
one of those is caught only by running reads in a read-only transaction (dbhub's read-only source does; see
tests/system/sqlservers/test_dbhub.py).
"""

from __future__ import annotations

import pglast
from pglast import ast, parser
from pglast.enums import ObjectType

from gateway.statements.model import (
    DDL,
    DELETE,
    INSERT,
    OTHER,
    READ,
    TRUNCATE,
    UPDATE,
    StatementClass,
    Syntax,
    Table,
)
from gateway.statements.postgres_measure import measure
from gateway.statements.postgres_tree import function_name, nodes, printed, table, tables, walk
from gateway.statements.refusals import Refusal, StatementRefused

WRITING = frozenset(
    {
        # sequences, settings, locks, notifications
        "nextval", "setval", "set_config", "pg_notify", "txid_current", "pg_current_xact_id",
        "pg_advisory_lock", "pg_advisory_lock_shared", "pg_advisory_xact_lock", "pg_advisory_xact_lock_shared",
        "pg_try_advisory_lock", "pg_try_advisory_lock_shared", "pg_try_advisory_xact_lock",
        "pg_try_advisory_xact_lock_shared", "pg_advisory_unlock", "pg_advisory_unlock_shared",
        "pg_advisory_unlock_all",
        # the server itself
        "pg_terminate_backend", "pg_cancel_backend", "pg_reload_conf", "pg_rotate_logfile", "pg_switch_wal",
        "pg_create_restore_point", "pg_promote", "pg_backup_start", "pg_backup_stop", "pg_start_backup",
        "pg_stop_backup", "pg_log_backend_memory_contexts", "pg_sleep", "pg_sleep_for", "pg_sleep_until",
        "pg_stat_reset", "pg_stat_reset_shared", "pg_stat_reset_single_table_counters",
        "pg_import_system_collations",
        # replication
        "pg_create_physical_replication_slot", "pg_create_logical_replication_slot", "pg_drop_replication_slot",
        "pg_copy_physical_replication_slot", "pg_copy_logical_replication_slot", "pg_replication_slot_advance",
        "pg_logical_emit_message", "pg_logical_slot_get_changes", "pg_logical_slot_get_binary_changes",
        "pg_replication_origin_create", "pg_replication_origin_drop", "pg_replication_origin_advance",
        "pg_replication_origin_session_setup", "pg_replication_origin_session_reset",
        "pg_replication_origin_xact_setup",
        # large objects and server files
        "lo_create", "lo_creat", "lo_import", "lo_export", "lo_unlink", "lo_put", "lo_from_bytea", "lo_truncate",
        "lo_truncate64", "lowrite", "lo_open", "lo_close", "pg_read_file", "pg_read_binary_file", "pg_ls_dir",
        "pg_stat_file", "pg_ls_logdir", "pg_ls_waldir", "pg_ls_tmpdir", "pg_ls_archive_statusdir",
        # SQL given as text, other servers, tables named by a string
        "query_to_xml", "query_to_xmlschema", "query_to_xml_and_xmlschema", "cursor_to_xml", "cursor_to_xmlschema",
        "table_to_xml", "table_to_xmlschema", "table_to_xml_and_xmlschema", "schema_to_xml", "schema_to_xmlschema",
        "schema_to_xml_and_xmlschema", "database_to_xml", "database_to_xmlschema", "database_to_xml_and_xmlschema",
        "dblink", "dblink_exec", "dblink_connect", "dblink_connect_u", "dblink_send_query", "dblink_open",
        "dblink_fetch",
        # random values (see postgres_measure.VOLATILE): harmless in a read, refused where they pick a write's rows
        "setseed",
    }
)  # fmt: skip

KINDS: dict[type[ast.Node], StatementClass] = {
    ast.SelectStmt: READ,
    ast.InsertStmt: INSERT,
    ast.UpdateStmt: UPDATE,
    ast.DeleteStmt: DELETE,
    ast.TruncateStmt: TRUNCATE,
    **dict.fromkeys(
        (
            ast.CreateStmt,
            ast.CreateTableAsStmt,
            ast.AlterTableStmt,
            ast.DropStmt,
            ast.IndexStmt,
            ast.ViewStmt,
            ast.RenameStmt,
            ast.CommentStmt,
            ast.CreateSeqStmt,
            ast.AlterSeqStmt,
            ast.CreateSchemaStmt,
            ast.CreateEnumStmt,
            ast.CompositeTypeStmt,
            ast.CreateDomainStmt,
            ast.AlterObjectSchemaStmt,
        ),
        DDL,
    ),
}
"""Top nodes and their class; any other (COPY, DO, CALL, EXPLAIN, SET, LISTEN, VACUUM, PREPARE, MERGE, GRANT,
CREATE FUNCTION or TRIGGER, ...) is OTHER: it runs code, changes sessions or servers, or mixes classes."""

LITERAL_TOKENS = frozenset({"SCONST", "USCONST", "BCONST", "XCONST", "UIDENT", "C_COMMENT", "SQL_COMMENT"})
DATA_MODIFYING = (ast.InsertStmt, ast.UpdateStmt, ast.DeleteStmt, ast.MergeStmt)


def read(text: str) -> Syntax:
    """What libpg_query finds in one statement (refused: none, several, unparsable, an ambiguous string)."""
    try:
        tokens = parser.scan(text)
        parsed = pglast.parse_sql(text)
    except parser.ParseError as exc:
        raise StatementRefused(Refusal.UNPARSABLE, f"PostgreSQL cannot parse it: {exc}") from None
    if not parsed:
        raise StatementRefused(Refusal.EMPTY, "there is no statement, only blanks or comments; send one statement")
    if len(parsed) > 1:
        raise StatementRefused(
            Refusal.SEVERAL_STATEMENTS, f"PostgreSQL reads {len(parsed)} statements here; send one at a time"
        )
    statement = parsed[0].stmt
    assert statement is not None
    try:
        normalised = printed(statement)
    except Exception as exc:  # pglast has no printer for some node: a construct this analysis does not model
        raise StatementRefused(
            Refusal.NOT_UNDERSTOOD, f"this form of statement cannot be printed back ({type(exc).__name__})"
        ) from None
    _refuse_backslashes(normalised)
    kind = _kind(statement)
    written = _written(statement)
    return Syntax(
        text=normalised,
        keyword=_keyword(text, tokens),
        kind=kind,
        tables=tables(statement) | frozenset(written),
        written=written,
        functions=frozenset(function_name(node) for node in walk(statement) if isinstance(node, ast.FuncCall)),
        unknown_functions=frozenset(),
        hidden_writes=_hidden_writes(statement),
        measure=measure(statement, kind) if kind.writes else None,
    )


def literals(text: str) -> tuple[tuple[int, int], ...]:
    """Where PostgreSQL's lexer finds strings, quoted names and comments: spans (start, end exclusive)."""
    try:
        tokens = parser.scan(text)
    except parser.ParseError as exc:
        raise StatementRefused(Refusal.UNPARSABLE, f"PostgreSQL cannot read it: {exc}") from None
    return tuple(
        (token.start, token.end + 1)
        for token in tokens
        if token.name in LITERAL_TOKENS or (token.name == "IDENT" and text[token.start] == '"')
    )


def same(original: str, normalised: str) -> bool:
    """Whether libpg_query reads both texts as the same tree (positions aside)."""
    try:
        return bool(pglast.parse_sql(original) == pglast.parse_sql(normalised))
    except parser.ParseError:
        return False


def table_entry(entry: str) -> Table:
    """An allow-list entry (``tenants``, ``public.tenants``, ``"Tenants"``) as the table PostgreSQL would resolve."""
    try:
        parsed = pglast.parse_sql(f"SELECT FROM {entry}")
    except parser.ParseError:
        parsed = ()
    statements = [raw.stmt for raw in parsed if raw.stmt is not None]
    found = [node for node in walk(tuple(statements)) if isinstance(node, ast.RangeVar)]
    plain = len(statements) == 1 and len(found) == 1
    if not plain or printed(statements[0]) != f"SELECT FROM {printed(found[0])}" or found[0].alias or not found[0].inh:
        raise ValueError(f"{entry!r} is not a table name (write table, schema.table, or a quoted name)")
    try:
        return table(found[0])
    except StatementRefused as refused:
        raise ValueError(f"{entry!r}: {refused.sentence}") from None


def _kind(statement: ast.Node) -> StatementClass:
    if isinstance(statement, ast.SelectStmt) and statement.intoClause is not None:
        return DDL  # SELECT ... INTO creates a table
    return KINDS.get(type(statement), OTHER)


def _written(statement: ast.Node) -> tuple[Table, ...]:
    if isinstance(statement, (ast.InsertStmt, ast.UpdateStmt, ast.DeleteStmt)):
        assert statement.relation is not None
        return (table(statement.relation),)
    if isinstance(statement, ast.TruncateStmt):
        return tuple(table(node) for node in nodes(statement.relations) if isinstance(node, ast.RangeVar))
    if isinstance(statement, ast.DropStmt) and statement.removeType == ObjectType.OBJECT_TABLE:
        return tuple(_dropped(name) for name in statement.objects or () if isinstance(name, tuple))
    into = statement.into if isinstance(statement, ast.CreateTableAsStmt) else getattr(statement, "intoClause", None)
    if isinstance(into, ast.IntoClause) and into.rel is not None:
        return (table(into.rel),)
    relation = getattr(statement, "relation", None)
    if isinstance(relation, ast.RangeVar) and isinstance(statement, (ast.CreateStmt, ast.AlterTableStmt)):
        return (table(relation),)
    if isinstance(relation, ast.RangeVar) and isinstance(statement, (ast.IndexStmt, ast.RenameStmt)):
        return (table(relation),)
    return ()


def _dropped(name: tuple[ast.Node, ...]) -> Table:
    parts = [str(part.sval) for part in name if isinstance(part, ast.String)]
    if len(parts) > 2:
        raise StatementRefused(
            Refusal.NOT_UNDERSTOOD, f"the name {'.'.join(parts)} names a database; name the table as schema.table"
        )
    return Table(parts[0] if len(parts) == 2 else None, parts[-1])


def _hidden_writes(statement: ast.Node) -> tuple[str, ...]:
    found = []
    for node in walk(statement):
        if node is not statement and isinstance(node, DATA_MODIFYING):
            found.append(f"a {type(node).__name__.removesuffix('Stmt').upper()} nested inside the statement")
        if isinstance(node, ast.SelectStmt) and node.intoClause is not None:
            found.append("SELECT ... INTO, which creates a table")
        if isinstance(node, ast.SelectStmt) and node.lockingClause:
            found.append("a row-locking clause (FOR UPDATE, FOR SHARE), which takes write locks")
    return tuple(sorted(set(found)))


def _refuse_backslashes(normalised: str) -> None:
    """Refuse a plain string with a backslash in the text that will run (``E''`` strings mean the same either way)."""
    for token in parser.scan(normalised):
        if token.name == "SCONST" and normalised[token.start] == "'" and "\\" in normalised[token.start : token.end]:
            raise StatementRefused(
                Refusal.AMBIGUOUS_STRING,
                "a string holds a backslash, whose meaning depends on the server's standard_conforming_strings;"
                " write the string without one",
            )


def _keyword(text: str, tokens: list[parser.Token]) -> str:
    """The statement's leading keyword: its first token that is not a comment or an opening parenthesis."""
    for token in tokens:
        if token.name not in ("C_COMMENT", "SQL_COMMENT", "ASCII_40"):
            return text[token.start : token.end + 1].upper()
    return ""
