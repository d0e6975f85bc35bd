"""What the CLI prints for an operator shows every character of outside text as itself or as a visible escape."""

from __future__ import annotations

import unicodedata

from gateway.printable import HIDDEN, columns, printable


def test_control_bidi_and_format_characters_are_written_as_visible_escapes() -> None:
    assert printable("a\rb\x1b[2Kc\u202ed\u200be\\f\n") == "a\\rb\\x1b[2Kc\\u202ed\\u200be\\\\f\\n"
    assert printable("tn_checkout01 ünïcödé 日本") == "tn_checkout01 ünïcödé 日本"


def test_every_cell_of_a_table_is_escaped_and_the_columns_still_align() -> None:
    shown = columns([("key", "outcome"), ("k\r\u2067x", "applied"), ("plain", "refused")])
    lines = shown.splitlines()
    assert [char for char in shown if char != "\n" and unicodedata.category(char) in HIDDEN] == []
    assert lines[1].startswith("k\\r\\u2067x  applied")
    assert {line.index(word) for line, word in zip(lines, ["outcome", "applied", "refused"], strict=True)} == {12}
