"""Checks on the characters of a statement's text, which no parser is trusted with.

- Hidden characters are refused anywhere: a NUL ends the text early for a C driver (libpq), so the server would
  run less than was read; a control character, a bidi override or another format character makes what a person
  reads differ from what runs. Tab, line feed and carriage return are whitespace to every SQL lexer.
- Outside string literals, quoted names and comments only ASCII is allowed: a fullwidth semicolon, a modifier
  letter apostrophe or a no-break space is a look-alike that one lexer takes as punctuation or space and another
  as part of a name.
"""

from __future__ import annotations

import unicodedata

WHITESPACE = frozenset("\t\n\r")
HIDDEN = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"})


def hidden(text: str) -> tuple[int, str] | None:
    """The first hidden character and where it is, or None."""
    for index, char in enumerate(text):
        if char not in WHITESPACE and unicodedata.category(char) in HIDDEN:
            return index, char
    return None


def lookalike(text: str, literals: tuple[tuple[int, int], ...]) -> tuple[int, str] | None:
    """The first non-ASCII character outside the literal spans (start, end exclusive), or None."""
    inside = sorted(literals)
    span = 0
    for index, char in enumerate(text):
        while span < len(inside) and inside[span][1] <= index:
            span += 1
        if ord(char) > 127 and not (span < len(inside) and inside[span][0] <= index):
            return index, char
    return None


def named(char: str) -> str:
    """A character as a sentence can show it: its code point and Unicode name."""
    return f"U+{ord(char):04X} {unicodedata.name(char, 'unnamed')}"
