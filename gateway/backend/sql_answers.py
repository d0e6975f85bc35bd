"""What a statement-executing server answered, read by the shape it answers in. Pure: a ``Reply`` in, a ``Said``
out (None when the answer is in no shape the server gives: malformed).

    dbhub         ``@bytebase/dbhub``: JSON ``{"success": true, "data": {"statements": [{"sql", "rows", "count"}]}}``,
                  ``count`` the rows a read returned or a write changed; a failure is ``isError`` with
                  ``{"success": false, "error"}``. A bigint (``count(*)``) comes as a string.
    mcp-alchemy   ``mcp-alchemy``: text only (also as structuredContent ``{"result": text}``), never an error flag:
                  ``1. row\\ncol: value ...\\n\\nResult: N rows`` (or ``Result: showing first N rows (output
                  truncated)``), ``No rows returned``, ``Success: N rows affected``, ``Error: ...``.

    count_of, fingerprint_of   a measuring read's one row as its number (and the fingerprint of the rows)

tests/system/sqlservers/ records both servers' answers as they are; the gateway sends one statement per call, so an
answer that speaks of any other number of statements is malformed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from gateway.records import Reply


@dataclass(frozen=True)
class Said:
    """One statement's answer (its rows, and the count the server states), or the server's refusal."""

    kind: Literal["answered", "failed"]
    rows: list[dict[str, Any]] = field(default_factory=list)
    count: int = 0
    """With rows: how many it returned. Without: the rows a write changed (or a read that returned none)."""
    cut: bool = False
    """The server itself left rows out of its answer (mcp-alchemy cuts at 4,000 characters)."""
    message: str = ""
    """A refusal: the server's own words (untrusted text: escape before a person reads it)."""


def dbhub(reply: Reply) -> Said | None:
    """dbhub's JSON answer."""
    body = reply.json()
    if not isinstance(body, dict):
        return None
    if reply.is_error or body.get("success") is False:
        return Said("failed", message=str(body.get("error", "")))
    data = body.get("data")
    statements = data.get("statements") if isinstance(data, dict) else None
    if body.get("success") is not True or not isinstance(statements, list) or len(statements) != 1:
        return None
    (statement,) = statements
    rows, count = (statement.get("rows"), statement.get("count")) if isinstance(statement, dict) else (None, None)
    if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows) or not isinstance(count, int):
        return None
    if not _natural(count) or (rows and len(rows) != count):
        return None
    return Said("answered", rows=rows, count=count)


RESULT = re.compile(r"Result: (?:(\d+) rows|showing first (\d+) rows \(output truncated\))")
ROW = re.compile(r"(\d+)\. row")
CHANGED = re.compile(r"Success: (\d+) rows affected")


def alchemy(reply: Reply) -> Said | None:
    """mcp-alchemy's text answer."""
    body = reply.json()
    text = body.get("result") if isinstance(body, dict) else reply.text
    if not isinstance(text, str) or reply.is_error:
        return None
    if text.startswith("Error:"):
        return Said("failed", message=text.removeprefix("Error:").strip())
    if text == "No rows returned":
        return Said("answered")
    if changed := CHANGED.fullmatch(text):
        return Said("answered", count=int(changed.group(1)))
    lines = text.split("\n")
    result = RESULT.fullmatch(lines[-1])
    if result is None:
        return None
    rows = _alchemy_rows(lines[:-1])
    count = int(result.group(1) or result.group(2))
    if not rows or len(rows) != count:
        return None
    return Said("answered", rows=rows, count=count, cut=result.group(2) is not None)


def _alchemy_rows(lines: list[str]) -> list[dict[str, Any]]:
    """``N. row`` blocks of ``column: value`` lines; a line of neither kind continues the value before it (a
    value with a line break)."""
    rows: list[dict[str, Any]] = []
    last: str | None = None
    for line in lines:
        numbered = ROW.fullmatch(line)
        if numbered is not None and int(numbered.group(1)) == len(rows) + 1:
            rows.append({})
            last = None
        elif rows and ": " in line and last != "":
            last, _, value = line.partition(": ")
            rows[-1][last] = value
        elif rows and last is not None and line:
            rows[-1][last] += "\n" + line
    return rows


PARSERS: dict[str, Callable[[Reply], Said | None]] = {"dbhub": dbhub, "mcp-alchemy": alchemy}
"""Each answer format a ``[statements.NAME]`` may name (``answers``), by name."""

FINGERPRINT = re.compile(r"[0-9a-f]{32}|")


def count_of(said: Said) -> int | None:
    """A count read's number: one row of one column holding a natural number (or its digits), else None."""
    if said.kind != "answered" or len(said.rows) != 1 or len(said.rows[0]) != 1:
        return None
    return _number(next(iter(said.rows[0].values())))


def fingerprint_of(said: Said) -> tuple[int, str] | None:
    """A fingerprint read's one row: the rows it saw and the digest of their identities, else None."""
    if said.kind != "answered" or len(said.rows) != 1 or set(said.rows[0]) != {"rows", "fingerprint"}:
        return None
    rows, fingerprint = _number(said.rows[0]["rows"]), said.rows[0]["fingerprint"]
    if rows is None or not isinstance(fingerprint, str) or not FINGERPRINT.fullmatch(fingerprint):
        return None
    return rows, fingerprint


def _number(value: Any) -> int | None:
    if _natural(value):
        return int(value)
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 19:
        return int(value)
    return None


def _natural(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
