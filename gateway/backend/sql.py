"""Statements sent to a statement-executing server (gateway.config.statements), each one call of the server's own
tool, its answer read by the shape the server answers in (gateway.backend.sql_answers).

    rules_of    a source's rules for some classes of statement (gateway.statements.rules)
    analysed    a statement held to a source's rules (gateway.statements), or the caller's refusal: a statement
                past the size limit is request_too_large, any other statement_refused with ``details.reason``
    read        a read through the source's read tool (retried once on a fresh connection, as every read)
    Measured    a write's measure: its number, and the fingerprint of the rows it touches where the dialect has one
    measured    that measure now: the number the statement gives, or its measuring read run through the read tool
    write_call  the backend call that runs a write: built here, sent once by the write driver

Only a statement's normalised text is ever sent (the analysis proved it reads back as what it checked). Nothing in
this module decides whether a write may run; it reads and it builds.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

from gateway.backend import Backend, BackendUnavailable, unreachable
from gateway.backend.sql_answers import PARSERS, Said, count_of, fingerprint_of
from gateway.config import StatementSource
from gateway.errors import Code, ToolError
from gateway.records import Reply
from gateway.statements.analysis import allowed_tables, analyse
from gateway.statements.model import Dialect, Statement, StatementClass
from gateway.statements.refusals import Refusal, StatementRefused
from gateway.statements.rules import Rules
from gateway.text import escaped

NOTHING_RUN = "Nothing was run."


def rules_of(source: StatementSource, classes: frozenset[str]) -> Rules:
    """The analysis's rules of ``[statements.NAME]`` for statements of ``classes`` (a query: ``read`` only)."""
    dialect = Dialect(source.dialect)
    return Rules(
        dialect=dialect,
        classes=frozenset(StatementClass(kind) for kind in classes),
        tables=allowed_tables(dialect, source.tables),
        writing_functions=frozenset(source.writing_functions),
        max_length=source.max_length,
    )


def analysed(
    source: StatementSource,
    name: str,
    classes: frozenset[str],
    text: str,
    expect: Literal["read", "write"],
) -> Statement:
    """The statement held to the rules of ``[statements.NAME]`` for ``classes``; a refusal names the reason."""
    try:
        return analyse(text, rules_of(source, classes), expect)
    except StatementRefused as refused:
        raise refusal(refused, name, source.max_length) from None


def refusal(refused: StatementRefused, name: str, max_length: int) -> ToolError:
    """A refused statement as the caller's refusal: what is wrong with it, and that nothing ran."""
    sentence = escaped(refused.sentence, 500)
    if refused.reason is Refusal.TOO_LONG:
        setting = f"statements.{name}.max_length"
        return ToolError(
            Code.REQUEST_TOO_LARGE,
            f"The statement is too long: {sentence} ({setting}). {NOTHING_RUN} Send a shorter statement.",
            details={"reason": refused.reason.value, "limit": max_length, "setting": setting},
        )
    return ToolError(
        Code.STATEMENT_REFUSED,
        f"The statement was refused: {sentence}. {NOTHING_RUN}",
        details={"reason": refused.reason.value},
    )


async def read(backend: Backend, backend_name: str, source: StatementSource, sql: str) -> Said:
    """One read's answer from the source's read tool; backend_unavailable or backend_error otherwise."""
    try:
        reply = await backend.read_tool(source.read_through(), {source.argument: sql}, source.timeout_seconds)
    except BackendUnavailable:
        raise unreachable(backend_name) from None
    said = PARSERS[source.answers](reply)
    if said is None:
        raise ToolError(Code.BACKEND_ERROR, "The database server answered in a shape it never gives. Nothing changed.")
    if said.kind == "failed":
        raise ToolError(
            Code.BACKEND_ERROR,
            f"The database refused the statement: {escaped(said.message, 300)}. Nothing was changed.",
            details={"backendMessage": said.message[:500]},
        )
    return said


@dataclass(frozen=True)
class Measured:
    """A write's measure at one moment: how many rows (``unit`` says of what) and, where the dialect allows it,
    a fingerprint of those rows' identities (another set of rows of the same size has another one)."""

    rows: int
    fingerprint: str | None = None


async def measured(backend: Backend, backend_name: str, source: StatementSource, statement: Statement) -> Measured:
    """The write's measure now: the number it states itself, or its measuring read's answer."""
    measure = statement.measure
    assert measure is not None  # the analysis measures every write it lets through
    if measure.given is not None:
        return Measured(measure.given)
    if measure.fingerprint_sql is not None:
        found = fingerprint_of(await read(backend, backend_name, source, measure.fingerprint_sql))
        if found is not None:
            return Measured(*found)
    elif measure.count_sql is not None:
        count = count_of(await read(backend, backend_name, source, measure.count_sql))
        if count is not None:
            return Measured(count)
    raise ToolError(Code.BACKEND_ERROR, "The database answered the measuring read with no count. Nothing changed.")


def write_call(backend: Backend, source: StatementSource, statement: Statement) -> Callable[[], Awaitable[Reply]]:
    """The call that runs the write (not retried: the driver sends it once)."""
    return lambda: backend.call_tool(source.tool, {source.argument: statement.text}, source.timeout_seconds)
