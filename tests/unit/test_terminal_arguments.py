"""The terminal client's arguments: ``key=value`` typed by the tool's inputSchema, ``key:=json`` any JSON value;
and what it prints is escaped."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.cli.call.arguments import UsageError, parse_pairs
from gateway.cli.call.failures import printable, unknown_tool
from gateway.cli.call.terminal import argument, render

SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "limit": {"type": "integer", "minimum": 1},
        "ratio": {"type": "number"},
        "dry": {"type": "boolean"},
        "tenantId": {"type": "string"},
        "fixture": {"type": "string", "enum": ["empty", "5"]},
        "cursor": {"type": ["string", "null"]},
        "size": {"enum": [1, 2]},
        "tags": {"type": "array"},
    },
}


def test_without_a_schema_words_are_strings_unless_marked_as_json() -> None:
    assert parse_pairs(["tenantId=tn_a", "limit:=5", "cursor=a=b"]) == {"tenantId": "tn_a", "limit": 5, "cursor": "a=b"}
    with pytest.raises(UsageError):
        parse_pairs(["limit:=five"])
    with pytest.raises(UsageError):
        parse_pairs(["tenantId"])


def test_a_typed_word_takes_the_type_its_schema_asks_for() -> None:
    words = ["limit=5", "ratio=0.5", "dry=true", "tenantId=007", "fixture=5", "cursor=null", "size=2"]
    assert parse_pairs(words, SCHEMA) == {
        "limit": 5,
        "ratio": 0.5,
        "dry": True,
        "tenantId": "007",
        "fixture": "5",
        "cursor": "null",
        "size": 2,
    }
    assert parse_pairs(["tags:=[1]", 'limit:="5"'], SCHEMA) == {"tags": [1], "limit": "5"}


@pytest.mark.parametrize("word", ["limit=five", "limit=5.5", "dry=maybe", "tags=a", "lmit=5"])
def test_a_word_the_schema_cannot_take_is_a_usage_error(word: str) -> None:
    with pytest.raises(UsageError):
        parse_pairs([word], SCHEMA)


def test_control_and_bidi_characters_are_shown_as_escapes() -> None:
    assert printable("tn_\x1b[2Ja\u202eb\u200bc") == "tn_\\u001b[2Ja\\u202eb\\u200bc"
    assert printable("Zürich 5 % ok") == "Zürich 5 % ok"
    shown = render({"tenants": [{"id": "tn_\x1b[31m", "name\u202e": "x\ny"}], "nextCursor": "\x07"})
    assert "\x1b" not in shown and "\u202e" not in shown and "\x07" not in shown and "\ny" not in shown


def test_an_unknown_tool_names_the_closest_one_and_lists_them_escaped() -> None:
    first, listing = unknown_tool("list_tenant", ["list_tenants", "reset_tenant", "evil\x1b[0m"])
    assert "did you mean list_tenants?" in first
    assert "evil\\u001b[0m" in listing and "\x1b" not in listing
    first, _ = unknown_tool("zzz", ["list_tenants"])
    assert "did you mean" not in first


def test_tools_shows_the_length_and_pattern_a_value_must_meet() -> None:
    """A short key fails on a pattern the listing showed, never on one it hid."""
    key = {"type": "string", "minLength": 8, "maxLength": 128, "pattern": "^[A-Za-z0-9._:-]+$"}
    line = argument(key, required=True)
    assert line == ("string, at least 8 characters, at most 128 characters, matching ^[A-Za-z0-9._:-]+$, required")
    assert "\\u001b" in argument({"type": "string", "pattern": "a\x1bb"}, required=False)
