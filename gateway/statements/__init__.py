"""Statements for a server whose tool executes whatever SQL it is given: what one is, and whether to refuse it.

Pure: text and rules in, an analysed statement or a refusal out; no I/O, no MCP. It imports the two parsers
(pglast for PostgreSQL, sqlglot for SQLite; bench/sqlparsers.py measured the choice), the standard library
(SQLite's tokenizer through ``sqlite3``, with no database opened) and nothing else of the gateway. The statement
tool kinds (through gateway.backend.sql, which sends what it lets through), ``inspect`` and the config (to read a
table allow-list, only for a config that has statements) may import it; it imports none of them.

    analysis          the entry point: analyse(text, rules) -> Statement, and the order of the checks
    rules             what a config allows: dialect, classes, tables, writing functions, size
    model             Dialect, StatementClass, Table, Measure, Statement, and a reader's Syntax
    refusals          Refusal (the stable reasons) and StatementRefused
    characters        hidden characters and look-alikes, checked before and after any parser
    postgres          PostgreSQL by libpg_query: class, tables, functions, hidden writes, normalised text
    postgres_tree     walking its trees: tables with WITH names in scope, names printed back
    postgres_measure  the reads that measure a write (count, and a fingerprint of the rows' identities)
    sqlite            SQLite by sqlglot, statement ends confirmed by SQLite's own tokenizer
    sqlite_tree       walking its trees, with SQLite's name folding
    sqlite_measure    the reads that measure a write (count only)

Dialects: PostgreSQL and SQLite. MySQL and MariaDB are left out on purpose: how their server lexes a statement
depends on its ``sql_mode`` (ANSI_QUOTES, NO_BACKSLASH_ESCAPES), and it executes the inside of ``/*! ... */``
comments, so no parser can be sure from the text alone. SQL Server and others wait for a server to verify against.
"""
