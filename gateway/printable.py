"""Text from outside (a backend, a caller, a gateway answer) made safe to show in a terminal.

A control character can move the cursor, recolour or clear the screen, or fake a prompt; a bidi or other
format character can make ``tn_a`` display as something else. Each is shown as its escape (``\\x1b``,
``\\u202e``) instead, so what a person reads is what the bytes say.
"""

from __future__ import annotations

import unicodedata

UNSAFE = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}
"""Control, format (bidi, zero-width), surrogate, private-use, unassigned, line and paragraph separators."""


def printable(text: str) -> str:
    """``text`` with every unsafe character replaced by its escape."""
    if text.isprintable():  # the common case, and the fast one: no Cc/Cf/Z*-separator characters at all
        return text
    return "".join(_escape(char) if unicodedata.category(char) in UNSAFE else char for char in text)


def printable_lines(text: str) -> str:
    """Like ``printable``, but keeps line breaks (a multi-line message stays multi-line)."""
    return "\n".join(printable(line) for line in text.split("\n"))


def _escape(char: str) -> str:
    code = ord(char)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"
