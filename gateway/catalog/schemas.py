"""A JSON Schema compiled to plain Python checks, for the schemas the gateway itself publishes.

``jsonschema`` interprets a schema on every call: checking one 20-item ``list_tenants`` page against its
outputSchema took ~0.9 ms, most of the gateway's own time per read. ``compile_check`` turns a schema into
nested closures once. It knows a small subset of keywords (the ones config-built schemas use) with exactly
``jsonschema``'s Draft 2020-12 meaning; a schema using anything else compiles to ``None`` and the caller keeps
using ``jsonschema``. A check answers only valid / not valid: on "not valid" the caller asks ``jsonschema``
for the error to report, so messages do not change.

Patterns match whole values, in both: JSON Schema's ``pattern`` is an ECMA-262 search, where ``^x$`` cannot
match ``"x\n"``, but Python's ``$`` also matches before a trailing newline, so ``re.search`` would let
``tn_load04\n`` through ``^[A-Za-z0-9_.-]{1,64}$``. The compiled check matches whole values, the fallback is
``validator`` (jsonschema's Draft 2020-12 with the same ``pattern``), both through RE2 in linear time
(gateway.catalog.patterns: a backend's pattern is untrusted), and ``published`` anchors every
pattern a schema publishes (``^(?:...)$`` unless it is plainly ``^...$`` already), so a client reading it with
search semantics accepts exactly what the gateway accepts.

``format`` asserts only ``ASSERTED_FORMATS``, in both; any other format is an annotation, as Draft 2020-12 says by
default. So what is checked does not change when a package jsonschema looks for (rfc3339-validator, fqdn, ...)
happens to be installed. ``jsonschema`` itself is imported on first need: a failed check's message, a schema
outside the subset, an asserted format. It and its ``attrs`` / ``referencing`` tree hold about 3 MiB per process
that a gateway whose calls are valid never needs (bench/RESULTS.md, "Memory: what a worker holds").
"""

from __future__ import annotations

import functools
import numbers
import operator
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from gateway.catalog import patterns

if TYPE_CHECKING:
    from jsonschema import FormatChecker
    from jsonschema.protocols import Validator

Check = Callable[[Any], bool]

ASSERTED_FORMATS = frozenset({"date", "email", "idn-email", "idn-hostname", "ipv4", "ipv6", "regex", "uuid"})
"""The formats checked: those jsonschema's Draft 2020-12 checks with none of its optional packages but idna (a
dependency of the HTTP stack); where a check is missing (no idna), neither side asserts that format."""

# Keywords that only annotate: they never make an instance invalid.
ANNOTATIONS = frozenset(
    {"title", "description", "default", "examples", "$comment", "deprecated", "readOnly", "writeOnly"}
)
KNOWN = ANNOTATIONS | {
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "pattern",
    "enum",
    "format",
}


class Unsupported(Exception):
    """The schema uses a keyword (or a form of one) this compiler does not know."""


def compile_check(schema: Any) -> Check | None:
    """A function answering whether an instance is valid, or None when the schema is outside the subset."""
    try:
        return _compile(schema)
    except Unsupported:
        return None


def check_of(schema: Any) -> Check:
    """The compiled check, or jsonschema's answer (its validator built on the first call) where the schema is
    outside the subset."""
    compiled = compile_check(schema)
    if compiled is not None:
        return compiled
    fallback = functools.cache(lambda: validator(schema))
    return lambda value: fallback().is_valid(value)


def validator(schema: Any) -> Validator:
    """jsonschema's Draft 2020-12 validator for ``schema``, with whole-value patterns and ``ASSERTED_FORMATS``."""
    kind, formats = _jsonschema()
    return kind(schema, format_checker=formats)


def conforms(value: Any, name: str) -> bool:
    """Whether a value is of an asserted format, as jsonschema's check of that format says."""
    return _jsonschema()[1].conforms(value, name)


@functools.cache
def _jsonschema() -> tuple[type[Validator], FormatChecker]:
    from jsonschema import Draft202012Validator, FormatChecker, ValidationError
    from jsonschema.validators import extend

    def whole_pattern(validator: Any, pattern: str, instance: Any, schema: dict[str, Any]) -> Iterator[Any]:
        if validator.is_type(instance, "string") and not patterns.whole(pattern)(instance):
            yield ValidationError(f"{instance!r} does not match {pattern!r} as a whole")

    kind = extend(Draft202012Validator, {"pattern": whole_pattern})  # type: ignore[no-untyped-call]
    known = Draft202012Validator.FORMAT_CHECKER.checkers
    return kind, FormatChecker(formats=sorted(ASSERTED_FORMATS & set(known)))


def _is_integer(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and value.is_integer())


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Number) and not isinstance(value, bool)


TYPES: dict[str, Check] = {
    "object": lambda value: isinstance(value, dict),
    "array": lambda value: isinstance(value, list),
    "string": lambda value: isinstance(value, str),
    "boolean": lambda value: isinstance(value, bool),
    "integer": _is_integer,
    "number": _is_number,
    "null": lambda value: value is None,
}


def _compile(schema: Any) -> Check:
    if schema is True or schema == {}:
        return lambda value: True
    if not isinstance(schema, dict) or set(schema) - KNOWN:
        raise Unsupported
    checks: list[Check] = []
    if "type" in schema:
        names = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not names or any(name not in TYPES for name in names):
            raise Unsupported
        kinds = [TYPES[name] for name in names]
        checks.append(kinds[0] if len(kinds) == 1 else lambda value: any(kind(value) for kind in kinds))
    checks += _object_checks(schema)
    checks += _array_checks(schema)
    checks += _string_checks(schema)
    checks += _number_checks(schema)
    if "enum" in schema:
        choices = schema["enum"]
        if not isinstance(choices, list) or not all(isinstance(choice, str) for choice in choices):
            raise Unsupported  # equality across types (1 vs 1.0 vs True) is jsonschema's to decide
        allowed = frozenset(choices)
        checks.append(lambda value: isinstance(value, str) and value in allowed)
    return _all_of(checks)


def _all_of(checks: list[Check]) -> Check:
    # Plain loops and short-circuiting ``and``: a generator per call would cost more than the checks.
    if len(checks) == 1:
        return checks[0]
    if len(checks) == 2:
        first, second = checks
        return lambda value: first(value) and second(value)
    ordered = tuple(checks)

    def every(value: Any) -> bool:
        for check in ordered:  # noqa: SIM110 - all() over a generator is slower here
            if not check(value):
                return False
        return True

    return every


def _object_checks(schema: dict[str, Any]) -> list[Check]:
    checks: list[Check] = []
    properties = schema.get("properties", {})
    if not isinstance(properties, dict):
        raise Unsupported
    compiled = tuple((name, _compile(sub)) for name, sub in properties.items())
    if compiled:

        def each_property(value: Any) -> bool:
            if isinstance(value, dict):
                for name, check in compiled:
                    if name in value and not check(value[name]):
                        return False
            return True

        checks.append(each_property)
    required = schema.get("required", [])
    if not isinstance(required, list):
        raise Unsupported
    if required:
        needed = frozenset(required)
        checks.append(lambda value: not isinstance(value, dict) or needed.issubset(value))
    additional = schema.get("additionalProperties", True)
    if additional is False:
        known = frozenset(properties)
        checks.append(lambda value: not isinstance(value, dict) or known.issuperset(value))
    elif additional is not True:
        raise Unsupported
    return checks


def _array_checks(schema: dict[str, Any]) -> list[Check]:
    checks: list[Check] = []
    if "items" in schema:
        item = _compile(schema["items"])

        def each_item(value: Any) -> bool:
            if isinstance(value, list):
                for element in value:
                    if not item(element):
                        return False
            return True

        checks.append(each_item)
    low, high = _bound(schema, "minItems"), _bound(schema, "maxItems")
    if low is not None:
        checks.append(lambda value: not isinstance(value, list) or len(value) >= low)
    if high is not None:
        checks.append(lambda value: not isinstance(value, list) or len(value) <= high)
    return checks


def _string_checks(schema: dict[str, Any]) -> list[Check]:
    checks: list[Check] = []
    low, high = _bound(schema, "minLength"), _bound(schema, "maxLength")
    if low is not None:
        checks.append(lambda value: not isinstance(value, str) or len(value) >= low)
    if high is not None:
        checks.append(lambda value: not isinstance(value, str) or len(value) <= high)
    if "pattern" in schema:
        if not isinstance(schema["pattern"], str):
            raise Unsupported
        whole = patterns.whole(schema["pattern"])
        checks.append(lambda value: not isinstance(value, str) or whole(value))
    name = schema.get("format")
    if isinstance(name, str) and name in ASSERTED_FORMATS:
        checks.append(lambda value: conforms(value, name))
    return checks


BOUNDS: dict[str, Callable[[Any, Any], bool]] = {
    "minimum": operator.ge,
    "maximum": operator.le,
    "exclusiveMinimum": operator.gt,
    "exclusiveMaximum": operator.lt,
}


def _number_checks(schema: dict[str, Any]) -> list[Check]:
    return [_number_check(BOUNDS[keyword], schema[keyword]) for keyword in BOUNDS if keyword in schema]


def _number_check(holds: Callable[[Any, Any], bool], limit: Any) -> Check:
    if not _is_number(limit):
        raise Unsupported
    return lambda value: not _is_number(value) or holds(value, limit)


def _bound(schema: dict[str, Any], keyword: str) -> int | None:
    if keyword not in schema:
        return None
    value = schema[keyword]
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise Unsupported
    return value


def anchored(pattern: str) -> str:
    """The pattern as a whole-value match under search semantics too (ECMA-262, as clients read it)."""
    plain = pattern.startswith("^") and pattern.endswith("$") and not pattern.endswith("\\$") and "|" not in pattern
    return pattern if plain else f"^(?:{pattern})$"


def published(schema: Any) -> Any:
    """A schema as the gateway publishes it: every ``pattern`` anchored (see ``anchored``)."""
    if isinstance(schema, list):
        return [published(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    return {
        key: anchored(value) if key == "pattern" and isinstance(value, str) else published(value)
        for key, value in schema.items()
    }
