"""The declared types of the ID-token claims an approver condition reads, and the checks that make the condition
fail closed on any comparison across types.

CEL's equality is heterogeneous: ``5 != "contractors"`` and ``["contractors"] != "contractors"`` are simply true,
so ``approver.claims.dept != "contractors"`` would admit anyone whose provider sends ``dept`` as a list, a number
or a boolean. The CEL library (common-expression-language, Rust cel 0.14) has no type checker and no strict mode,
and its operators cannot be replaced, so the gateway keeps the types itself:

    claims = { dept = "string", level = "int", score = "double", mfa = "bool", groups = "list" }

- at evaluation: a person whose declared claim holds a value of another type (a list where a string was declared,
  a bool where an int was) is not admitted at all (``conforming``); only declared claims are given to the
  condition, so it never meets a value of a type nobody declared;
- at load: every ``approver.claims.NAME`` the condition names must be declared; a comparison (``==``, ``!=``,
  ``in``) of a claim or of ``approver.sub``/``iss``/``email`` with a literal or another claim of another type is
  refused (``cross_type_comparisons``, read from the condition's tokens); and the condition is evaluated with
  values of the declared types, empty and not, so an operation no type allows (``level < "3"``) is refused.

``list`` is a list of strings (the only list an ID-token claim is kept as); ``int`` and ``double`` compare with
each other (CEL's numeric equality), with nothing else.
"""

from __future__ import annotations

import re
from typing import Any, Literal

ClaimType = Literal["string", "int", "double", "bool", "list"]

SAMPLES: dict[str, tuple[Any, Any]] = {
    "string": ("", "x"),
    "int": (0, 1),
    "double": (0.0, 1.5),
    "bool": (False, True),
    "list": ([], ["x"]),
}
"""Values of each type, empty and not, that a condition is evaluated with at load."""

PERSON = {"sub": "string", "iss": "string", "email": "string"}
"""The facts a condition reads besides its claims, all strings."""

_TOKEN = re.compile(
    r"""
    (?P<space>\s+)
  | (?P<string>[rRbB]{0,2}(?:\"\"\"(?:\\.|[^\\])*?\"\"\"|'''(?:\\.|[^\\])*?'''|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'))
  | (?P<number>0[xX][0-9a-fA-F]+[uU]?|\d+\.\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+|\d+[uU]?)
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op>==|!=|<=|>=|&&|\|\||[-+*/%<>!?:.,()\[\]{}])
    """,
    re.VERBOSE,
)
OPEN = {None, "(", "[", ",", "&&", "||", "!", "?", ":"}
"""Tokens after which an operand stands alone (nothing binds tighter to its left)."""
CLOSE = {None, ")", "]", ",", "&&", "||", "?", ":"}
"""Tokens before which an operand stands alone (nothing binds tighter to its right)."""


def conforming(claims: dict[str, Any], declared: dict[str, ClaimType]) -> tuple[dict[str, Any] | None, str | None]:
    """The declared claims as a condition reads them (a double as a float), and None with the first claim whose
    value has another type than declared (the person is then not admitted)."""
    kept: dict[str, Any] = {}
    for name, kind in declared.items():
        if name not in claims:
            continue  # absent: the condition may ask has(); reading it fails closed
        value = claims[name]
        if not _is_a(value, kind):
            return None, name
        kept[name] = float(value) if kind == "double" else value
    return kept, None


def _is_a(value: Any, kind: ClaimType) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "double":
        return isinstance(value, int | float) and not isinstance(value, bool)
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def samples(declared: dict[str, ClaimType]) -> list[dict[str, Any]]:
    """The approver facts a condition is evaluated with at load: every claim empty, then every claim not."""
    return [
        {
            "approver": {
                **dict.fromkeys(PERSON, ("", "x")[which]),
                "claims": {name: SAMPLES[kind][which] for name, kind in declared.items()},
            }
        }
        for which in (0, 1)
    ]


def undeclared_claims(expression: str, declared: dict[str, ClaimType]) -> list[str]:
    """The claims a condition names (``approver.claims.NAME``, ``approver.claims["NAME"]``) that are not declared."""
    tokens = _tokens(expression)
    named = [found[0] for index in range(len(tokens)) if (found := _claim_at(tokens, index)) is not None]
    return list(dict.fromkeys(name for name in named if name not in declared))


def cross_type_comparisons(expression: str, declared: dict[str, ClaimType]) -> list[str]:
    """Each comparison in the condition (``==``, ``!=``, ``in``) of a typed fact (a claim, or sub/iss/email) with a
    literal or another typed fact of another type, in words (``approver.claims.dept (string) != 5 (int)``)."""
    tokens = _tokens(expression)
    types = {**PERSON, **{f"claims.{name}": LIST if kind == "list" else kind for name, kind in declared.items()}}
    found = []
    for index, (kind, text) in enumerate(tokens):
        membership = (kind, text) == ("name", "in")
        if not membership and (kind, text) not in (("op", "=="), ("op", "!=")):
            continue
        left, right = _operand_before(tokens, index, types), _operand_after(tokens, index + 1, types)
        if left is None or right is None or not (left.fact or right.fact):
            continue
        if membership:
            if right.kind.startswith("list of ") and not _comparable(left.kind, right.kind.removeprefix("list of ")):
                found.append(f"{left} in {right}")
        elif not _comparable(left.kind, right.kind):
            found.append(f"{left} {text} {right}")
    return found


LIST = "list of string"
NUMBERS = {"int", "uint", "double"}


class Operand:
    """One side of a comparison: a typed fact or a literal, and its type."""

    def __init__(self, shown: str, kind: str, fact: bool) -> None:
        self.shown, self.kind, self.fact = shown, kind, fact

    def __str__(self) -> str:
        return f"{self.shown} ({self.kind})"


def _comparable(one: str, other: str) -> bool:
    return one == other or {one, other} <= NUMBERS


def _tokens(expression: str) -> list[tuple[str, str]]:
    return [
        (match.lastgroup or "op", match.group()) for match in _TOKEN.finditer(expression) if match.lastgroup != "space"
    ]


def _text(tokens: list[tuple[str, str]], index: int) -> str | None:
    return tokens[index][1] if 0 <= index < len(tokens) else None


def _claim_at(tokens: list[tuple[str, str]], start: int) -> tuple[str, int] | None:
    """The claim named by ``approver.claims.NAME`` or ``approver.claims["NAME"]`` at ``start``, and where it ends."""
    if [_text(tokens, start + n) for n in range(3)] != ["approver", ".", "claims"] or _text(tokens, start - 1) == ".":
        return None
    if _text(tokens, start + 3) == "." and start + 4 < len(tokens) and tokens[start + 4][0] == "name":
        return tokens[start + 4][1], start + 5
    if _text(tokens, start + 3) == "[" and _text(tokens, start + 5) == "]" and tokens[start + 4][0] == "string":
        return tokens[start + 4][1].strip("\"'"), start + 6
    return None


def _fact_at(tokens: list[tuple[str, str]], start: int, types: dict[str, str]) -> tuple[Operand, int] | None:
    """The typed fact standing at ``start`` (``approver.sub``, a declared claim), where it ends; None where it is
    read further (``approver.claims.groups[0]``, ``.size()``)."""
    claim = _claim_at(tokens, start)
    if claim is not None:
        name, end = f"claims.{claim[0]}", claim[1]
    elif [_text(tokens, start), _text(tokens, start + 1)] == ["approver", "."] and _text(tokens, start + 2) in PERSON:
        name, end = str(_text(tokens, start + 2)), start + 3
    else:
        return None
    if name not in types:
        return None
    kind, shown = types[name], f"approver.{name}"
    if kind == LIST and _text(tokens, end) == "[" and _text(tokens, end + 2) == "]" and tokens[end + 1][0] == "number":
        kind, shown, end = "string", f"{shown}[{tokens[end + 1][1]}]", end + 3  # one element of a list of strings
    if _text(tokens, end) in (".", "[", "("):
        return None
    return Operand(shown, kind, fact=True), end


def _operand_before(tokens: list[tuple[str, str]], op: int, types: dict[str, str]) -> Operand | None:
    """The typed fact or literal ending just before ``op``, where nothing binds it more tightly on its left."""
    for start in range(max(0, op - 9), op):  # the longest fact: approver.claims["NAME"][0], 9 tokens
        found = _fact_at(tokens, start, types)
        if found is not None and found[1] == op:
            return found[0] if _text(tokens, start - 1) in OPEN else None
    return _literal(tokens[op - 1]) if op >= 1 and _text(tokens, op - 2) in OPEN else None


def _operand_after(tokens: list[tuple[str, str]], start: int, types: dict[str, str]) -> Operand | None:
    """The typed fact, literal or list of literals starting at ``start``, where nothing binds it more tightly on
    its right."""
    found = _fact_at(tokens, start, types)
    if found is not None:
        return found[0] if _text(tokens, found[1]) in CLOSE else None
    if _text(tokens, start) == "[":
        close = next((i for i in range(start, len(tokens)) if tokens[i][1] == "]"), len(tokens))
        items = [_literal(token) for token in tokens[start + 1 : close] if token[1] != ","]
        kinds = {item.kind for item in items if item is not None}
        if close == len(tokens) or _text(tokens, close + 1) not in CLOSE or None in items or len(kinds) != 1:
            return None
        return Operand("[...]", f"list of {kinds.pop()}", fact=False)
    return _literal(tokens[start]) if start < len(tokens) and _text(tokens, start + 1) in CLOSE else None


def _literal(token: tuple[str, str]) -> Operand | None:
    kind, text = token
    if kind == "string":
        return Operand(text, "bytes" if "b" in text.split(text[-1])[0].lower() else "string", fact=False)
    if kind == "number":
        whole = re.fullmatch(r"\d+|0[xX][0-9a-fA-F]+", text) is not None
        unsigned = text.lower().endswith("u")
        return Operand(text, "uint" if unsigned else "int" if whole else "double", fact=False)
    if kind == "name" and text in ("true", "false", "null"):
        return Operand(text, "null" if text == "null" else "bool", fact=False)
    return None
