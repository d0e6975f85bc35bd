"""What a person is shown of outside text: every character as itself or as a visible escape, read back one way."""

from __future__ import annotations

import re
import tomllib
import unicodedata

from hypothesis import given
from hypothesis import strategies as st

from gateway.text import HIDDEN, columns, escaped, printable, quoted, toml_comment, toml_string

ESCAPE = re.compile(r"\\(\\|u[0-9a-f]{4}|U[0-9a-f]{8})")


def read_back(shown: str) -> str:
    """The one string a person reads in escaped text: the inverse of ``printable``."""
    return ESCAPE.sub(lambda found: "\\" if found[1] == "\\" else chr(int(found[1][1:], 16)), shown)


def test_control_bidi_and_format_characters_are_written_as_visible_escapes() -> None:
    assert printable("a\rb\x1b[2Kc\u202ed\u200be\\f\n") == "a\\u000db\\u001b[2Kc\\u202ed\\u200be\\\\f\\u000a"
    assert printable("tn_checkout01 ünïcödé 日本") == "tn_checkout01 ünïcödé 日本"


def test_a_code_point_above_the_bmp_has_an_escape_of_its_own_length() -> None:
    assert printable("\U000e0001") == "\\U000e0001"
    assert printable("\U000e0001" + "1") != printable("\ue000" + "11")
    assert escaped("\U000e00011") == "\\U000e00011" and escaped("\ue00011") == "\\ue00011"


def test_escaped_and_quoted_cut_long_text_and_show_where_it_ends() -> None:
    assert escaped("x" * 10, max_length=5) == "xxxx…"
    assert quoted('say "hi"\u202e') == '"say \\"hi\\"\\u202e"'


def test_every_cell_of_a_table_is_escaped_and_the_columns_still_align() -> None:
    shown = columns([("key", "outcome"), ("k\r\u2067x", "applied"), ("plain", "refused")])
    lines = shown.splitlines()
    assert [char for char in shown if char != "\n" and unicodedata.category(char) in HIDDEN] == []
    assert lines[1].startswith("k\\u000d\\u2067x  applied")
    assert {line.index(word) for line, word in zip(lines, ["outcome", "applied", "refused"], strict=True)} == {16}


# Characters an escape is made of, the escapes' own edges, and anything else, surrogates included.
TRICKY = st.sampled_from(["\\", "u", "U", "0", "1", "e", "\ue000", "\U000e0001", "\uffff", "\U00010000", "\x00"])
TEXT = st.text(st.one_of(TRICKY, st.characters(exclude_categories=())), max_size=24)


@given(TEXT)
def test_escaped_text_reads_back_as_exactly_the_text_and_shows_nothing_hidden(text: str) -> None:
    shown = printable(text)
    assert read_back(shown) == text
    assert not any(unicodedata.category(char) in HIDDEN for char in shown)


@given(TEXT, TEXT)
def test_two_different_texts_never_print_alike(first: str, second: str) -> None:
    assert (printable(first) == printable(second)) == (first == second)


SURROGATE = re.compile("[\ud800-\udfff]")


@given(TEXT)
def test_a_toml_string_reads_back_as_the_text_and_nothing_else(text: str) -> None:
    parsed = tomllib.loads(f"key = {toml_string(text)}\n")
    assert parsed == {"key": SURROGATE.sub("\ufffd", text)}  # TOML cannot spell a lone surrogate


@given(TEXT)
def test_a_toml_comment_ends_at_its_own_line_whatever_it_holds(text: str) -> None:
    comment = toml_comment(text)
    assert tomllib.loads(f"{comment}\nkey = 1\n") == {"key": 1}
    assert "\n" not in comment and read_back(comment.removeprefix("# ")) == text


def test_a_server_name_cannot_add_a_table_through_a_comment_or_a_string() -> None:
    attack = 'srv\n[backend.headers_from_env]\nX-Exfil = "GATEWAY_SECRET_KEY"\n#\u202e\x1b[2J'
    text = f"{toml_comment(attack)}\n[gateway]\nname = {toml_string(attack)}\n"
    assert tomllib.loads(text) == {"gateway": {"name": attack}}


def test_the_ascii_fast_path_spells_exactly_what_the_character_rules_spell() -> None:
    from gateway.text import _spelled

    for code in range(128):
        for text in (chr(code), f"a{chr(code)}b"):
            assert printable(text) == "".join(_spelled(char) for char in text), repr(text)
