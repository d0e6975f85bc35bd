"""What a config allows a statement to be: its dialect, classes, tables, the functions it may not call, its size.

The config's own model (a later tool kind) builds a ``Rules``; this package only reads it. Table entries are
parsed by the dialect's own rules (``gateway.statements.analysis.allowed_tables``), so ``Tenants`` in the config
means what it would mean in a statement.
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.statements.model import DELETE, INSERT, OTHER, READ, UPDATE, Dialect, StatementClass, Table

DEFAULT_CLASSES = frozenset({READ, INSERT, UPDATE, DELETE})
"""Reads and row writes; DDL and TRUNCATE only where a config says so."""
MAX_LENGTH = 20_000
"""Characters: a statement a person can still read on a page before saying yes to it."""


@dataclass(frozen=True)
class Rules:
    """The rules a statement is held to. ``tables`` None allows every table (a config should name them);
    ``writing_functions`` are refused on top of the dialect's built-in list, by name in any schema, in any case."""

    dialect: Dialect
    classes: frozenset[StatementClass] = DEFAULT_CLASSES
    tables: frozenset[Table] | None = None
    writing_functions: frozenset[str] = frozenset()
    max_length: int = MAX_LENGTH

    def __post_init__(self) -> None:
        if OTHER in self.classes:
            raise ValueError("the class 'other' (COPY, DO, CALL, SET, ...) cannot be allowed: it has no preview")
        if self.max_length < 1:
            raise ValueError("max_length must be at least 1")
