"""One statement in, one analysed ``Statement`` out, or a ``StatementRefused`` with a stable reason.

    analyse(text, rules, expect=None)      the checks below, in this order; the first refusal wins
    allowed_tables(dialect, entries)       a config's allow-list, read by the dialect's own name rules
    dialect_reader(dialect)                the dialect's reader, its parser imported on first use

 1. size                         too_long
 2. characters of the text       hidden_characters
 3. look-alikes in the text      lookalike_characters (the dialect's lexer says where the literals are)
 4. the dialect's reading        empty, unparsable, several_statements, not_understood, parsers_disagree,
                                 ambiguous_string
 5. the normalised text          hidden_characters, not_canonical (it must read back as the same statement,
                                 the same tree)
 6. what it is                   hidden_write, class_mismatch, not_a_read / not_a_write, class_not_allowed
 7. what runs                    semicolon (a ';' left in the normalised text, where a server's own statement
                                 splitter could cut it)
 8. what it touches              function_not_allowed, table_not_allowed
 9. a write's measure            not_measurable

Only the normalised text is ever meant to run: the dialect printed it from the tree the checks looked at, and
step 5 proves that reading it again gives that tree.
"""

from __future__ import annotations

import hashlib
import importlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache
from typing import Literal

from gateway.statements import characters
from gateway.statements.model import KEYWORD_CLASSES, OTHER, READ, Dialect, Measure, Statement, Syntax, Table
from gateway.statements.refusals import Refusal, StatementRefused
from gateway.statements.rules import Rules


@dataclass(frozen=True)
class Reader:
    """A dialect's reader: where a text's literals are, one statement's syntax, whether two texts are one tree,
    an allow-list entry's table, and its built-in writing functions."""

    literals: Callable[[str], tuple[tuple[int, int], ...]]
    read: Callable[[str], Syntax]
    same: Callable[[str, str], bool]
    table_entry: Callable[[str], Table]
    writing: frozenset[str]


MODULES = {Dialect.POSTGRES: "gateway.statements.postgres", Dialect.SQLITE: "gateway.statements.sqlite"}
"""Each dialect's reading, over its parser (pglast, sqlglot)."""


@cache
def dialect_reader(dialect: Dialect) -> Reader:
    """The dialect's reader. Its module, and the parser under it, is imported on first use: a config's statement
    tools ask for it as the config is read (``allowed_tables``), and a gateway without any never holds the
    parsers (about 11 MiB of its memory)."""
    module = importlib.import_module(MODULES[dialect])
    return Reader(module.literals, module.read, module.same, module.table_entry, module.WRITING)


def analyse(text: str, rules: Rules, expect: Literal["read", "write"] | None = None) -> Statement:
    """The statement, analysed and held to the rules (``expect``: the tool takes only reads, or only writes)."""
    reader = dialect_reader(rules.dialect)
    if len(text) > rules.max_length:
        raise StatementRefused(
            Refusal.TOO_LONG, f"the statement has {len(text)} characters, past the limit of {rules.max_length}"
        )
    _no_hidden(text, "the statement")
    _no_lookalike(text, reader.literals(text))
    syntax = _read(reader, text)
    normalised = syntax.text
    _no_hidden(normalised, "the normalised statement")
    _canonical(reader, text, syntax)
    _what_it_is(syntax, rules, expect)
    if ";" in normalised:
        raise StatementRefused(
            Refusal.SEMICOLON,
            "a ';' would remain in the text sent to the server, whose own statement splitter could cut it there;"
            " write the value without ';'",
        )
    _what_it_touches(reader, syntax, rules)
    measure = syntax.measure
    if isinstance(measure, str):
        raise StatementRefused(Refusal.NOT_MEASURABLE, f"its effect cannot be measured before it runs: {measure}")
    return Statement(
        dialect=rules.dialect,
        text=normalised,
        kind=syntax.kind,
        keyword=syntax.keyword,
        tables=tuple(sorted(syntax.tables, key=_order)),
        written=syntax.written,
        functions=tuple(sorted(syntax.functions)),
        digest=digest(normalised),
        measure=measure if isinstance(measure, Measure) else None,
    )


def digest(normalised: str) -> str:
    """``sha256:`` and the hex digest of the normalised text."""
    return "sha256:" + hashlib.sha256(normalised.encode()).hexdigest()


def allowed_tables(dialect: Dialect, entries: Iterable[str]) -> frozenset[Table]:
    """The tables a config's entries name, read by the dialect's rules (ValueError naming a bad entry)."""
    return frozenset(dialect_reader(dialect).table_entry(entry) for entry in entries)


def _read(reader: Reader, text: str) -> Syntax:
    """The reader's findings; anything a parser raises beyond a refusal is a statement not understood (closed)."""
    try:
        return reader.read(text)
    except StatementRefused:
        raise
    except Exception as exc:  # a parser's internal failure on hostile text: refuse, never guess
        raise StatementRefused(
            Refusal.NOT_UNDERSTOOD, f"the parser failed on it ({type(exc).__name__}); write it more plainly"
        ) from None


def _no_hidden(text: str, what: str) -> None:
    found = characters.hidden(text)
    if found:
        index, char = found
        raise StatementRefused(
            Refusal.HIDDEN_CHARACTERS,
            f"{what} holds {characters.named(char)} at character {index}; send plain text",
        )


def _no_lookalike(text: str, literals: tuple[tuple[int, int], ...]) -> None:
    found = characters.lookalike(text, literals)
    if found:
        index, char = found
        raise StatementRefused(
            Refusal.LOOKALIKE_CHARACTERS,
            f"{characters.named(char)} at character {index} is outside any string or quoted name;"
            " write SQL's own punctuation in ASCII, and quote a name that needs other letters",
        )


def _canonical(reader: Reader, text: str, syntax: Syntax) -> None:
    try:
        again = _read(reader, syntax.text)
    except StatementRefused as refused:
        raise StatementRefused(
            Refusal.NOT_CANONICAL, f"the normalised statement does not read back ({refused.reason})"
        ) from None
    if again.meaning() != syntax.meaning() or not reader.same(text, syntax.text):
        raise StatementRefused(
            Refusal.NOT_CANONICAL, "the normalised statement reads back as another statement; write it more plainly"
        )
    _no_lookalike(syntax.text, reader.literals(syntax.text))


def _what_it_is(syntax: Syntax, rules: Rules, expect: Literal["read", "write"] | None) -> None:
    if syntax.hidden_writes:
        raise StatementRefused(
            Refusal.HIDDEN_WRITE, f"it holds {'; '.join(syntax.hidden_writes)}; a read must not write"
        )
    if syntax.kind not in KEYWORD_CLASSES.get(syntax.keyword, frozenset({OTHER})):
        raise StatementRefused(
            Refusal.CLASS_MISMATCH,
            f"it starts with {syntax.keyword} but parses as {syntax.kind}; write it so that both agree",
        )
    if expect == "read" and syntax.kind != READ:
        raise StatementRefused(
            Refusal.NOT_A_READ, f"it is {syntax.kind}, not a read; preview a write with the statement preview tool"
        )
    if expect == "write" and syntax.kind == READ:
        raise StatementRefused(Refusal.NOT_A_WRITE, "it is a read, which changes nothing; run it with the query tool")
    if syntax.kind not in rules.classes:
        allowed = ", ".join(sorted(rules.classes))
        raise StatementRefused(
            Refusal.CLASS_NOT_ALLOWED, f"the class {syntax.kind} is not allowed here (allowed: {allowed})"
        )


def _what_it_touches(reader: Reader, syntax: Syntax, rules: Rules) -> None:
    denied = {name.rpartition(".")[2].casefold() for name in reader.writing | rules.writing_functions}
    for name in sorted(syntax.functions):
        if name.rpartition(".")[2].casefold() in denied:
            raise StatementRefused(
                Refusal.FUNCTION_NOT_ALLOWED, f"it calls {name}(), which writes or reaches outside; leave it out"
            )
    for name in sorted(syntax.unknown_functions):
        raise StatementRefused(
            Refusal.FUNCTION_NOT_ALLOWED,
            f"it calls {name}(), which is not one of the dialect's known functions; leave it out",
        )
    if rules.tables is not None:
        outside = sorted(syntax.tables - rules.tables, key=_order)
        if outside:
            raise StatementRefused(
                Refusal.TABLE_NOT_ALLOWED,
                f"it touches {', '.join(map(str, outside))}, outside the allowed tables",
            )


def _order(table: Table) -> tuple[str, str]:
    return (table.schema or "", table.name)
