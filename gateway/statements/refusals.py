"""Why a statement is refused: one stable reason each, and the exception that carries it with a sentence.

A tool that relays statements maps a reason to its own error code; the reason is the part a test (and a caller)
can match, the sentence names the thing and the way out. Every refusal is decided before anything is sent to a
database, so a refused statement never runs.
"""

from __future__ import annotations

from enum import StrEnum


class Refusal(StrEnum):
    """The reasons, roughly in the order they are checked."""

    TOO_LONG = "too_long"
    """Past the configured size limit."""
    HIDDEN_CHARACTERS = "hidden_characters"
    """A NUL byte, a control character other than tab and line breaks, a bidi or other format character."""
    EMPTY = "empty"
    """No statement at all (only blanks or comments)."""
    UNPARSABLE = "unparsable"
    """The dialect's parser cannot parse it."""
    SEVERAL_STATEMENTS = "several_statements"
    """More than one statement, whatever hides the second (comments, strings, quoting)."""
    NOT_UNDERSTOOD = "not_understood"
    """The parser fell back to raw text, or met a construct this analysis does not model."""
    PARSERS_DISAGREE = "parsers_disagree"
    """The parser and the dialect's second opinion (the database's own tokenizer) read it differently."""
    AMBIGUOUS_STRING = "ambiguous_string"
    """A string whose meaning depends on a server setting (a backslash in a PostgreSQL string)."""
    LOOKALIKE_CHARACTERS = "lookalike_characters"
    """A non-ASCII character outside string literals and quoted names (a look-alike of ``;`` or a quote)."""
    SEMICOLON = "semicolon"
    """A ``;`` left in the text to execute, where a server's own statement splitter could cut it in two."""
    NOT_CANONICAL = "not_canonical"
    """The normalised text does not parse back to the same statement."""
    HIDDEN_WRITE = "hidden_write"
    """A write inside a read: a data-modifying WITH, SELECT ... INTO, a row-locking clause."""
    CLASS_MISMATCH = "class_mismatch"
    """The parsed statement is another class than its leading keyword says."""
    CLASS_NOT_ALLOWED = "class_not_allowed"
    """The statement's class (DDL, TRUNCATE, other, ...) is not one the config allows."""
    FUNCTION_NOT_ALLOWED = "function_not_allowed"
    """A function marked as writing (built in or by the config), or, in SQLite, one outside the known set."""
    TABLE_NOT_ALLOWED = "table_not_allowed"
    """A table outside the config's allow-list."""
    NOT_MEASURABLE = "not_measurable"
    """A write whose effect cannot be measured honestly before it runs (upsert, RETURNING, WITH, randomness)."""
    NOT_A_READ = "not_a_read"
    """A write (or anything but a read) where only a read is taken."""
    NOT_A_WRITE = "not_a_write"
    """A read where a write is to be previewed."""


class StatementRefused(Exception):
    """A statement refused before anything ran: the stable ``reason`` and a ``sentence`` for the caller."""

    def __init__(self, reason: Refusal, sentence: str) -> None:
        super().__init__(f"{reason}: {sentence}")
        self.reason = reason
        self.sentence = sentence
