"""SQLite statements, read by sqlglot (the one maintained parser with a SQLite dialect), with SQLite's own
tokenizer as a second opinion on where statements end.

sqlglot is not SQLite, so where they could disagree this module refuses:
- statement ends: every ``;`` sqlglot reads as a statement end must be one for SQLite's tokenizer
  (``sqlite3.complete_statement``, SQLite's ``sqlite3_complete``: no database is opened) and the other way round;
- raw-text fallbacks (sqlglot's ``Command``, for REPLACE INTO, VACUUM, CREATE TRIGGER, ...): not understood;
- functions: SQLite's built-in set is small and closed, and anything else was registered by the application
  that opened the database, so a function must be one sqlglot models or one of ``KNOWN``; ``WRITING`` ones are
  refused by name;
- comments: sqlglot keeps no position for them, so a non-ASCII character in a comment is refused like one
  outside any literal.

The normalised text is sqlglot's printing of its tree (comments dropped, names quoted the standard way); the
analysis checks that sqlglot reads it back to the same tree.
"""

from __future__ import annotations

import sqlite3

import sqlglot
from sqlglot import exp
from sqlglot.errors import ErrorLevel, SqlglotError
from sqlglot.tokenizer_core import Token, TokenType

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
from gateway.statements.refusals import Refusal, StatementRefused
from gateway.statements.sqlite_measure import measure
from gateway.statements.sqlite_tree import folded, function_name, is_named_table, table, tables

DIALECT = "sqlite"
WRITING = frozenset({"load_extension", "readfile", "writefile", "edit", "fts3_tokenizer", "sqlite_dbpage"})
KNOWN = frozenset(
    {
        "changes", "last_insert_rowid", "total_changes", "likelihood", "likely", "unlikely", "octet_length",
        "printf", "quote", "randomblob", "zeroblob", "sqlite_source_id", "sqlite_version", "time", "datetime",
        "julianday", "unixepoch", "timediff", "total", "json", "json_array", "json_array_length", "json_insert",
        "json_replace", "json_valid", "json_quote", "json_patch", "json_each", "json_tree", "jsonb",
        "json_error_position", "json_pretty",
    }
)  # fmt: skip
"""SQLite's built-in functions that sqlglot does not model (they reach sqlglot as anonymous calls)."""
MAX_SEMICOLONS = 64
"""Each ``;`` costs SQLite's tokenizer one pass over the text before it; past this many, refuse instead."""

LITERAL_TOKENS = frozenset(
    {TokenType.STRING, TokenType.IDENTIFIER, TokenType.NATIONAL_STRING, TokenType.HEX_STRING, TokenType.BIT_STRING}
)
DATA_MODIFYING = (exp.Insert, exp.Update, exp.Delete, exp.Merge)
CONNECTORS = (exp.Connector,)
"""AND, OR, XOR: sqlglot models them as functions; they are not calls."""


def read(text: str) -> Syntax:
    """What sqlglot finds in one SQLite statement, its ends confirmed by SQLite's tokenizer."""
    if text.count(";") > MAX_SEMICOLONS:
        raise StatementRefused(Refusal.SEVERAL_STATEMENTS, f"it holds more than {MAX_SEMICOLONS} ';'")
    try:
        tokens = sqlglot.tokenize(text, read=DIALECT)
        parsed = [tree for tree in sqlglot.parse(text, read=DIALECT) if tree is not None]
    except SqlglotError as exc:
        raise StatementRefused(Refusal.UNPARSABLE, f"it cannot be parsed as SQLite: {_first_line(exc)}") from None
    parsed = [tree for tree in parsed if not isinstance(tree, exp.Semicolon)]
    if not parsed:
        raise StatementRefused(Refusal.EMPTY, "there is no statement, only blanks or comments; send one statement")
    if len(parsed) > 1:
        raise StatementRefused(Refusal.SEVERAL_STATEMENTS, f"it holds {len(parsed)} statements; send one at a time")
    _same_ends(text, tokens)
    statement = parsed[0]
    if any(isinstance(node, exp.Command) for node in statement.walk()):
        raise StatementRefused(
            Refusal.NOT_UNDERSTOOD, "the parser could only keep part of it as raw text (an unsupported form)"
        )
    try:
        normalised = statement.sql(
            dialect=DIALECT, comments=False, normalize_functions=False, unsupported_level=ErrorLevel.RAISE
        )
    except SqlglotError as exc:
        raise StatementRefused(Refusal.NOT_UNDERSTOOD, f"it cannot be printed back: {_first_line(exc)}") from None
    kind = _kind(statement)
    written = _written(statement)
    functions = [
        node for node in statement.walk() if isinstance(node, exp.Func) and not isinstance(node, exp.Connector)
    ]
    return Syntax(
        text=normalised,
        keyword=_keyword(tokens),
        kind=kind,
        tables=tables(statement) | frozenset(written),
        written=written,
        functions=frozenset(function_name(node) for node in functions),
        unknown_functions=frozenset(
            folded(node.name)
            for node in functions
            if isinstance(node, exp.Anonymous) and folded(node.name) not in KNOWN | WRITING
        ),
        hidden_writes=_hidden_writes(statement),
        measure=measure(statement, kind) if kind.writes else None,
    )


def literals(text: str) -> tuple[tuple[int, int], ...]:
    """Where sqlglot's SQLite tokenizer finds strings and quoted names (not comments: it keeps no place for them)."""
    try:
        tokens = sqlglot.tokenize(text, read=DIALECT)
    except SqlglotError as exc:
        raise StatementRefused(Refusal.UNPARSABLE, f"it cannot be read as SQLite: {_first_line(exc)}") from None
    return tuple((token.start, token.end + 1) for token in tokens if token.token_type in LITERAL_TOKENS)


def same(original: str, normalised: str) -> bool:
    """Whether sqlglot reads both texts as the same tree (an empty statement after a ``;`` aside)."""
    try:
        trees = [[tree for tree in sqlglot.parse(text, read=DIALECT) if tree] for text in (original, normalised)]
    except SqlglotError:
        return False
    return bool(trees[0] == trees[1])


PLAIN_SELECT = frozenset({"expressions", "from_"})


def table_entry(entry: str) -> Table:
    """An allow-list entry (``tenants``, ``main.tenants``, ``"Tenants"``) as the table SQLite would resolve."""
    try:
        parsed = sqlglot.parse(f"SELECT * FROM {entry}", read=DIALECT)
    except SqlglotError:
        parsed = []
    found = [node for tree in parsed if tree is not None for node in tree.find_all(exp.Table)]
    only = len(parsed) == 1 and len(found) == 1 and is_named_table(found[0]) and not found[0].alias
    if not only or parsed[0] is None or {key for key, value in parsed[0].args.items() if value} - PLAIN_SELECT:
        raise ValueError(f"{entry!r} is not a table name (write table, schema.table, or a quoted name)")
    try:
        return table(found[0])
    except StatementRefused as refused:
        raise ValueError(f"{entry!r}: {refused.sentence}") from None


def _same_ends(text: str, tokens: list[Token]) -> None:
    """Refuse unless SQLite's tokenizer ends statements at exactly the ``;`` sqlglot does."""
    ours = {token.start for token in tokens if token.token_type == TokenType.SEMICOLON}
    theirs = {index for index, char in enumerate(text) if char == ";" and sqlite3.complete_statement(text[: index + 1])}
    if ours != theirs:
        raise StatementRefused(
            Refusal.PARSERS_DISAGREE,
            "the parser and SQLite's own tokenizer see statements end at different places; write it more plainly",
        )


def _kind(statement: exp.Expr) -> StatementClass:
    if isinstance(statement, exp.Query):
        return DDL if statement.args.get("into") else READ
    if isinstance(statement, exp.Insert):
        return INSERT
    if isinstance(statement, exp.Update):
        return UPDATE
    if isinstance(statement, exp.Delete):
        return DELETE
    if isinstance(statement, exp.TruncateTable):
        return TRUNCATE
    if isinstance(statement, exp.Alter):
        return DDL
    if isinstance(statement, (exp.Create, exp.Drop)) and str(statement.args.get("kind")).upper() in SCHEMA_OBJECTS:
        return DDL
    return OTHER


SCHEMA_OBJECTS = ("TABLE", "INDEX", "VIEW")


def _written(statement: exp.Expr) -> tuple[Table, ...]:
    if isinstance(statement, (exp.Insert, exp.Update, exp.Delete, exp.Alter)):
        target = statement.this
        found = (
            target
            if isinstance(target, exp.Table)
            else target.find(exp.Table)
            if isinstance(target, exp.Expr)
            else None
        )
        return (table(found),) if isinstance(found, exp.Table) else ()
    if isinstance(statement, exp.TruncateTable):
        return tuple(table(node) for node in statement.expressions if isinstance(node, exp.Table))
    if isinstance(statement, exp.Drop):
        return tuple(table(node) for node in statement.args.get("tables") or () if isinstance(node, exp.Table))
    if isinstance(statement, exp.Create):
        found = statement.find(exp.Table)
        return (table(found),) if isinstance(found, exp.Table) else ()
    return ()


def _hidden_writes(statement: exp.Expr) -> tuple[str, ...]:
    found = set()
    for node in statement.walk():
        if node is not statement and isinstance(node, DATA_MODIFYING):
            found.add(f"a {type(node).__name__.upper()} nested inside the statement")
        if isinstance(node, exp.Select) and node.args.get("into"):
            found.add("SELECT ... INTO, which creates a table")
        if isinstance(node, exp.Select) and node.args.get("locks"):
            found.add("a row-locking clause (FOR UPDATE, FOR SHARE)")
    return tuple(sorted(found))


def _keyword(tokens: list[Token]) -> str:
    for token in tokens:
        if token.token_type != TokenType.L_PAREN:
            return token.text.upper()
    return ""


def _first_line(exc: Exception) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
