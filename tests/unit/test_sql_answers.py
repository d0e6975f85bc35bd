"""What a statement-executing server answered, read by its shape (gateway/backend/sql_answers.py): each shape the
real servers give (tests/system/sqlservers/ records them), and answers in no shape, which are malformed (None)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gateway.backend.sql_answers import Said, alchemy, count_of, dbhub, fingerprint_of
from gateway.records import Reply


def hub(*statements: dict[str, Any]) -> Reply:
    return Reply(False, json.dumps({"success": True, "data": {"statements": list(statements), "source_id": "x"}}))


def text(answer: str) -> Reply:
    """mcp-alchemy's answer as the backend client reads it: its structuredContent, as JSON."""
    return Reply(False, json.dumps({"result": answer}))


@pytest.mark.parametrize(
    ("reply", "said"),
    [
        (hub({"sql": "s", "rows": [{"a": 1}], "count": 1}), Said("answered", [{"a": 1}], 1)),
        (hub({"sql": "s", "rows": [], "count": 3}), Said("answered", [], 3)),
        (hub({"sql": "s", "rows": [], "count": 0}), Said("answered", [], 0)),
        (Reply(True, json.dumps({"success": False, "error": "boom", "code": "X"})), Said("failed", message="boom")),
        (hub({"sql": "s", "rows": [{"a": 1}], "count": 2}), None),  # rows and count disagree
        (hub({"sql": "s", "rows": [], "count": -1}), None),
        (hub({"sql": "s", "rows": [], "count": True}), None),
        (hub({"sql": "s", "rows": [], "count": "3"}), None),
        (hub({"sql": "s", "rows": [1], "count": 1}), None),
        (hub(), None),  # no statement
        (hub({"sql": "a", "rows": [], "count": 1}, {"sql": "b", "rows": [], "count": 1}), None),  # two statements
        (Reply(False, "done"), None),
        (Reply(False, "[]"), None),
    ],
)
def test_dbhubs_answers(reply: Reply, said: Said | None) -> None:
    assert dbhub(reply) == said


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        ("1. row\nid: tn_a\nname: Alpha\n\nResult: 1 rows", Said("answered", [{"id": "tn_a", "name": "Alpha"}], 1)),
        ("1. row\nnote: two\nlines\n\nResult: 1 rows", Said("answered", [{"note": "two\nlines"}], 1)),
        (
            "1. row\nn: 1\n\n2. row\nn: 2\n\nResult: showing first 2 rows (output truncated)",
            Said("answered", [{"n": "1"}, {"n": "2"}], 2, cut=True),
        ),
        ("No rows returned", Said("answered")),
        ("Success: 3 rows affected", Said("answered", count=3)),
        (
            "Error: (sqlite3.OperationalError) no such table: x",
            Said("failed", message="(sqlite3.OperationalError) no such table: x"),
        ),
        ("1. row\nn: 1\n\nResult: 2 rows", None),  # says two, shows one
        ("Result: 0 rows", None),
        ("Success: many rows affected", None),
        ("something else", None),
    ],
)
def test_mcp_alchemys_answers(answer: str, said: Said | None) -> None:
    assert alchemy(text(answer)) == said


def test_mcp_alchemys_plain_text_is_read_too_and_an_error_flag_is_malformed() -> None:
    assert alchemy(Reply(False, "Success: 1 rows affected")) == Said("answered", count=1)
    assert alchemy(Reply(True, "Success: 1 rows affected")) is None


@pytest.mark.parametrize(
    ("rows", "count"),
    [
        ([{"count": "812"}], 812),
        ([{"COUNT(*)": 6}], 6),
        ([{"count": "-1"}], None),
        ([{"count": "1e3"}], None),
        ([{"count": "\uff18"}], None),  # a fullwidth digit is a digit to str.isdigit, not to a count
        ([{"count": 1.5}], None),
        ([{"count": "1", "other": 2}], None),
        ([{"count": "1"}, {"count": "2"}], None),
        ([], None),
    ],
)
def test_a_count_is_one_row_of_one_natural_number(rows: list[dict[str, Any]], count: int | None) -> None:
    assert count_of(Said("answered", rows, len(rows))) == count


def test_a_fingerprint_is_a_count_and_an_md5_or_nothing_for_no_rows() -> None:
    md5 = "0123456789abcdef0123456789abcdef"
    assert fingerprint_of(Said("answered", [{"rows": "3", "fingerprint": md5}], 1)) == (3, md5)
    assert fingerprint_of(Said("answered", [{"rows": "0", "fingerprint": ""}], 1)) == (0, "")
    assert fingerprint_of(Said("answered", [{"rows": "3", "fingerprint": md5.upper()}], 1)) is None
    assert fingerprint_of(Said("answered", [{"rows": "3", "fingerprint": md5 + "0"}], 1)) is None
    assert fingerprint_of(Said("failed", message="x")) is None
