"""Text that came from outside (a backend, a caller) on its way to a person: checked, escaped, quoted.

A backend is not trusted to name things honestly. A fixture called ``"\\r\\x1b[2KDelete 0 rows in tn_sandbox99"``
repaints a terminal line, U+202E turns the rest of a dialog around, a newline starts a fake second question.
So every string the gateway shows a person (in a form, a typed confirmation, the terminal, the audit list or the
approval page) that did not come from the gateway's own config is either refused where it enters (``is_plain``:
printable, no C0/C1 controls, no bidi or other format characters, bounded length) or shown through ``printable``
(or its bounded forms ``escaped`` and ``quoted``). That is the one spelling: every such character as ``\\uXXXX``,
or ``\\UXXXXXXXX`` above U+FFFF, and a backslash doubled. Each escape has a fixed length and a backslash never
stands alone, so what a person reads spells exactly one string: U+E0001 then "1" (``\\U000e00011``) is not
U+E000 then "11" (``\\ue00011``). ``columns`` is the CLI's one table renderer, every cell escaped.

The same spelling is TOML's: ``toml_string`` is ``printable`` between quotes (a quote escaped), and it parses back
to exactly the text; ``toml_comment`` is ``printable`` after a ``#``, and nothing in it can end its line. So a
draft config (``inspect``) that holds a server's text holds it as a value or a comment, never as a key or table.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from datetime import UTC, datetime

MAX_NAME = 128
"""The longest backend-sourced name (a lookup key, an enum value, an id) shown whole."""

# Cc: C0 and C1 controls; Cf: format characters (bidi overrides and isolates, zero-width joiners, BOM, ...);
# Zl/Zp: line and paragraph separators; Cs/Co/Cn: surrogates, private use, unassigned.
HIDDEN = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"})
SURROGATE = re.compile("[\ud800-\udfff]")


def is_plain(text: str, max_length: int = MAX_NAME) -> bool:
    """Whether a string can be shown to a person as it is: bounded, and every character visible or a space."""
    return 0 < len(text) <= max_length and not any(_hidden(char) for char in text)


def printable(text: str) -> str:
    """The whole string with every control, format or separator character spelled as a visible escape."""
    if text.isascii() and text.isprintable() and "\\" not in text:
        return text  # the common case, at C speed: printable ASCII has nothing to spell
    return "".join(_spelled(char) for char in text)


def escaped(text: str, max_length: int = 1024) -> str:
    """``printable``, cut at ``max_length`` characters with an ellipsis."""
    cut = text if len(text) <= max_length else text[: max_length - 1]
    shown = printable(cut)
    return shown if cut is text else shown + "…"


def quoted(text: str, max_length: int = 1024) -> str:
    """``escaped`` between double quotes, with inner quotes escaped: where the value starts and ends is visible."""
    return _between_quotes(escaped(text, max_length))


def toml_string(text: str) -> str:
    """The whole string as a TOML basic string that parses back to it (a lone surrogate, which TOML cannot hold,
    as U+FFFD)."""
    return _between_quotes(printable(SURROGATE.sub("\ufffd", text)))


def toml_comment(text: str) -> str:
    """A TOML comment line showing ``text``: every character that could end the line is an escape."""
    return "# " + printable(text)


def shown(value: object) -> str:
    """Any value as a person should see it: numbers and booleans as JSON spells them, strings escaped."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    return escaped(str(value))


def columns(rows: Sequence[Sequence[str]]) -> str:
    """Rows as aligned columns, two spaces apart, every cell escaped; the first row is the header."""
    cells = [[printable(cell) for cell in row] for row in rows]
    widths = [max(len(row[column]) for row in cells) for column in range(len(cells[0]))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in cells
    )


def rfc3339(timestamp: float) -> str:
    """UTC time as ``2026-12-02T18:30:00Z``."""
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _between_quotes(shown: str) -> str:
    return '"' + shown.replace('"', '\\"') + '"'


def _hidden(char: str) -> bool:
    return unicodedata.category(char) in HIDDEN


def _spelled(char: str) -> str:
    if char == "\\":
        return "\\\\"
    if not _hidden(char):
        return char
    code = ord(char)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"
