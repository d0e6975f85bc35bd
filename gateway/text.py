"""Text that came from outside (a backend, a caller) on its way to a person: checked, escaped, quoted.

A backend is not trusted to name things honestly. A fixture called ``"\\r\\x1b[2KDelete 0 rows in tn_sandbox99"``
repaints a terminal line, U+202E turns the rest of a dialog around, a newline starts a fake second question.
So every string the gateway shows a person (in a form, a typed confirmation, the terminal or the approval page)
that did not come from the gateway's own config is either refused where it enters (``is_plain``: printable, no
C0/C1 controls, no bidi or other format characters, bounded length) or shown through ``escaped`` / ``quoted``,
which spell every such character as ``\\uXXXX`` so a person sees what is there.
"""

from __future__ import annotations

import unicodedata
from datetime import UTC, datetime

MAX_NAME = 128
"""The longest backend-sourced name (a lookup key, an enum value, an id) shown whole."""

# Cc: C0 and C1 controls; Cf: format characters (bidi overrides and isolates, zero-width joiners, BOM, ...);
# Zl/Zp: line and paragraph separators; Cs/Co/Cn: surrogates, private use, unassigned.
HIDDEN = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"})


def is_plain(text: str, max_length: int = MAX_NAME) -> bool:
    """Whether a string can be shown to a person as it is: bounded, and every character visible or a space."""
    return 0 < len(text) <= max_length and not any(_hidden(char) for char in text)


def escaped(text: str, max_length: int = 1024) -> str:
    """The string with every control, format or separator character spelled ``\\uXXXX`` (and a backslash
    doubled, so an escape cannot be faked), cut at ``max_length`` characters with an ellipsis."""
    cut = text if len(text) <= max_length else text[: max_length - 1]
    shown = "".join("\\\\" if char == "\\" else f"\\u{ord(char):04x}" if _hidden(char) else char for char in cut)
    return shown if cut is text else shown + "…"


def quoted(text: str, max_length: int = 1024) -> str:
    """``escaped`` between double quotes, with inner quotes escaped: where the value starts and ends is visible."""
    return '"' + escaped(text, max_length).replace('"', '\\"') + '"'


def shown(value: object) -> str:
    """Any value as a person should see it: numbers and booleans as JSON spells them, strings escaped."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    return escaped(str(value))


def _hidden(char: str) -> bool:
    return unicodedata.category(char) in HIDDEN and char != " "


def rfc3339(timestamp: float) -> str:
    """UTC time as ``2026-12-02T18:30:00Z``."""
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
