"""Regular expressions from JSON Schemas, run by RE2: in time linear in the value, whoever wrote them.

A schema's ``pattern`` may come from a backend (a pass-through tool's schemas), so it is untrusted. Python's ``re``
backtracks: ``^(a+)+$`` takes exponential time on ``"aaaa…!"``, and one call would hold the gateway's only thread
(every caller, every backend) for as long as it runs. RE2 runs any pattern it accepts in time linear in the value.
What it does not accept (backreferences, lookaround, a repetition count above 1000) is refused when the tool is
published (gateway.catalog.published: the tool is left out, naming the pattern), so no schema is ever checked by a
backtracking engine. So is ``patternProperties``: jsonschema reads those patterns with ``re`` inside
``additionalProperties`` and ``unevaluatedProperties`` too. RE2's ``\\d``, ``\\w`` and ``\\s`` are ASCII, as
ECMA-262's are (the dialect JSON Schema names).

    whole(pattern)     a check that a string matches the pattern as a whole (gateway.catalog.schemas says why whole)
    refusal(schema)    why a schema cannot be checked in linear time (the first pattern that cannot), or None
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import lru_cache
from typing import Any

import re2  # type: ignore[import-untyped]  # google-re2: no type information shipped

from gateway.text import quoted

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # RE2 would print a refused pattern, raw, on stderr

SUBSCHEMA = (
    *("items", "additionalItems", "additionalProperties", "unevaluatedItems", "unevaluatedProperties"),
    *("not", "if", "then", "else", "contains", "propertyNames"),
)
SUBSCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems", "items")
SUBSCHEMA_MAPS = ("properties", "$defs", "definitions", "dependentSchemas")


class PatternRefused(ValueError):
    """A pattern RE2 cannot run; the message names it (escaped) and why."""


@lru_cache(maxsize=1024)
def _compiled(pattern: str) -> Any:
    try:
        return re2.compile(pattern, _OPTIONS)
    except re2.error as exc:
        reason = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise PatternRefused(
            f"its pattern {quoted(pattern, 200)} cannot be checked in linear time ({quoted(reason, 200)})"
        ) from None


def whole(pattern: str) -> Callable[[str], bool]:
    """A check that a string matches ``pattern`` as a whole; PatternRefused for one RE2 cannot run."""
    fullmatch = _compiled(pattern).fullmatch
    return lambda value: fullmatch(value) is not None


def refusal(schema: Any) -> str | None:
    """Why ``schema`` cannot be checked in linear time, as a sentence, or None when every pattern in it can."""
    for found in _schemas(schema):
        if "patternProperties" in found:
            return "it uses patternProperties, whose patterns jsonschema runs with a backtracking engine"
        pattern = found.get("pattern")
        if pattern is None:
            continue
        if not isinstance(pattern, str):
            return "its pattern is not a string"
        try:
            _compiled(pattern)
        except PatternRefused as refused:
            return str(refused)
    return None


def _schemas(schema: Any) -> Iterator[dict[str, Any]]:
    """Every (sub)schema of ``schema``, itself first."""
    if not isinstance(schema, dict):
        return
    yield schema
    for keyword in SUBSCHEMA:
        yield from _schemas(schema.get(keyword))
    for keyword in SUBSCHEMA_LISTS:
        if isinstance(schema.get(keyword), list):
            for item in schema[keyword]:
                yield from _schemas(item)
    for keyword in SUBSCHEMA_MAPS:
        if isinstance(schema.get(keyword), dict):
            for item in schema[keyword].values():
                yield from _schemas(item)
