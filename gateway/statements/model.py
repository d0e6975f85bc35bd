"""What an analysed statement is: its dialect and class, the tables it touches, and how to measure a write.

Plain frozen dataclasses. Names are kept as the database resolves them (``Table``): PostgreSQL folds an unquoted
name to lower case (ASCII letters only) and keeps a quoted one as written; SQLite compares names without regard to
ASCII case, quoted or not, so its names are kept folded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum


class Dialect(StrEnum):
    """The SQL dialects analysed (bench/sqlparsers.py shows why these and how)."""

    POSTGRES = "postgres"
    SQLITE = "sqlite"


class StatementClass(StrEnum):
    """What a statement does, as far as a person deciding about it needs to know."""

    READ = "read"
    INSERT = "insert"
    UPDATE = "update"
    DELETE = "delete"
    DDL = "ddl"
    TRUNCATE = "truncate"
    OTHER = "other"

    @property
    def writes(self) -> bool:
        """Whether it changes data or schema (OTHER is neither a read nor a write that can be previewed)."""
        return self not in (StatementClass.READ, StatementClass.OTHER)


READ = StatementClass.READ
INSERT = StatementClass.INSERT
UPDATE = StatementClass.UPDATE
DELETE = StatementClass.DELETE
DDL = StatementClass.DDL
TRUNCATE = StatementClass.TRUNCATE
OTHER = StatementClass.OTHER

KEYWORD_CLASSES: dict[str, frozenset[StatementClass]] = {
    "SELECT": frozenset({READ}),
    "VALUES": frozenset({READ}),
    "TABLE": frozenset({READ}),
    "WITH": frozenset({READ, INSERT, UPDATE, DELETE}),
    "INSERT": frozenset({INSERT}),
    "UPDATE": frozenset({UPDATE}),
    "DELETE": frozenset({DELETE}),
    "TRUNCATE": frozenset({TRUNCATE}),
    "CREATE": frozenset({DDL, OTHER}),
    "ALTER": frozenset({DDL, OTHER}),
    "DROP": frozenset({DDL, OTHER}),
    "COMMENT": frozenset({DDL}),
}
"""The classes a statement's leading keyword allows; any other keyword allows only OTHER."""

_PLAIN_NAME = re.compile(r"[a-z_][a-z0-9_$]*")


@dataclass(frozen=True, order=True)
class Table:
    """A table as the database names it: its schema (None: found by the search path) and its name."""

    schema: str | None
    name: str

    def __str__(self) -> str:
        return ".".join(_spelled(part) for part in (self.schema, self.name) if part is not None)


def _spelled(part: str) -> str:
    return part if _PLAIN_NAME.fullmatch(part) else '"' + part.replace('"', '""') + '"'


@dataclass(frozen=True)
class Measure:
    """How to measure a write's effect, before the person's yes and again just before it runs.

    Exactly one of ``given`` (the statement states the number itself: the rows of ``INSERT ... VALUES``) and
    ``count_sql`` (a read answering one row with one column, the number) is set. ``fingerprint_sql``, where the
    dialect allows it cheaply, answers one row ``(rows, fingerprint)``: a digest of the identities of the rows
    the write will touch, so a plan notices another set of rows of the same size. ``unit`` says what the number
    counts, in words a person reads after it ("rows matched", "rows given", ...)."""

    unit: str
    given: int | None = None
    count_sql: str | None = None
    fingerprint_sql: str | None = None

    def __post_init__(self) -> None:
        if (self.given is None) == (self.count_sql is None):
            raise ValueError("a measure is either given or read, not both or neither")


@dataclass(frozen=True)
class Statement:
    """One statement, analysed and allowed by the rules: the normalised text is what runs and what a person sees.

    ``tables`` are all it touches (reads and writes), ``written`` those it changes; ``functions`` the functions
    it calls by name, as written (schema-qualified where it was). ``digest`` is ``sha256:`` and the hex digest of
    the normalised text. ``measure`` is None for a read."""

    dialect: Dialect
    text: str
    kind: StatementClass
    keyword: str
    tables: tuple[Table, ...]
    written: tuple[Table, ...]
    functions: tuple[str, ...]
    digest: str
    measure: Measure | None


@dataclass(frozen=True)
class Syntax:
    """What a dialect's reader finds in one statement, before the rules are applied (see gateway.statements.analysis).

    ``hidden_writes`` name each write found inside a read; ``unknown_functions`` those outside a dialect's closed
    set of functions; ``measure`` is the write's measure, or the sentence saying why it cannot be measured
    honestly (None for a read or OTHER)."""

    text: str
    keyword: str
    kind: StatementClass
    tables: frozenset[Table]
    written: tuple[Table, ...]
    functions: frozenset[str]
    unknown_functions: frozenset[str]
    hidden_writes: tuple[str, ...]
    measure: Measure | str | None

    def meaning(self) -> tuple[object, ...]:
        """Everything but the keyword as written: two readings mean the same statement when these are equal
        (``TABLE t`` prints back as ``SELECT * FROM t``)."""
        return (
            self.text,
            self.kind,
            self.tables,
            self.written,
            self.functions,
            self.unknown_functions,
            self.hidden_writes,
            self.measure,
        )
