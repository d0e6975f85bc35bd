"""Text for an operator's terminal: whatever came from a caller or a backend, with nothing that can repaint it.

A control character (a carriage return, an ANSI escape sequence), a bidi override or another format character
in an idempotency key or a backend's name could move the cursor, recolour or reorder what the operator reads:
an applied wipe shown as a decline. ``printable`` writes each such character as a visible escape (``\\r``,
``\\x1b``, ``\\u202e``) and the backslash itself as ``\\\\``, so what is shown is unambiguous. ``columns`` is
the one table renderer of the CLI, and escapes every cell.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\"}
HIDDEN = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}
"""Unicode categories that do not print as themselves: controls, format (bidi, zero-width), surrogates,
private use, unassigned, line and paragraph separators."""


def printable(text: str) -> str:
    """``text`` with every character that would not print as itself written as a visible escape."""
    return "".join(_shown(char) for char in text)


def _shown(char: str) -> str:
    if char in NAMED:
        return NAMED[char]
    if unicodedata.category(char) not in HIDDEN:
        return char
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def columns(rows: Sequence[Sequence[str]]) -> str:
    """Rows as aligned columns, two spaces apart, every cell escaped; the first row is the header."""
    cells = [[printable(cell) for cell in row] for row in rows]
    widths = [max(len(row[column]) for row in cells) for column in range(len(cells[0]))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in cells
    )
