"""The compiled schema checks answer exactly as the gateway's jsonschema validator does (Draft 2020-12 with
whole-value patterns), for every schema the gateway publishes.

Instances are drawn "near" each schema (right shapes with some wrong values, missing and extra keys, bools
for integers, integral floats, long strings) and from arbitrary JSON, so both answers come up often.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema.protocols import Validator

from gateway.catalog.published import build_catalog
from gateway.catalog.schemas import ASSERTED_FORMATS, Check, anchored, compile_check, published, validator
from gateway.config import load_config
from tests.support.profiles import PROFILES

LOOKUPS = {"fixtures": {"empty": 0, "smoke": 25}, "presets": {"off": 0, "canary": 5}}

scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12)
json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3),
    max_leaves=8,
)


MISSES = [True, 1.0, 2.5, -1, 10**12, "", "x" * 600, "EMPTY", "2026-13-02T18:30:00Z", "tn checkout", None, [], {}]


def near(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """A valid instance, the same with one part spoiled (a wrong value, a missing or an extra key), or any JSON."""
    return valid(schema) | spoiled(schema) | json_values


def valid(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    kind = schema.get("type")
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if kind == "object":
        return st.fixed_dictionaries({name: valid(sub) for name, sub in schema.get("properties", {}).items()})
    if kind == "array":
        return st.lists(valid(schema.get("items", {})), max_size=min(schema.get("maxItems", 5), 5))
    if kind == "string":
        if schema.get("format") == "date-time":
            return st.sampled_from(["2026-12-02T18:30:00Z", "2027-01-31T00:00:59Z"])
        if "pattern" in schema:
            return st.from_regex(schema["pattern"])
        return st.text(min_size=schema.get("minLength", 0), max_size=min(schema.get("maxLength", 20), 20))
    if kind == "integer":
        low = schema.get("minimum", -1000)
        return st.integers(low, schema.get("maximum", low + 1000))
    if kind == "boolean":
        return st.booleans()
    return json_values


@st.composite
def spoiled(draw: st.DrawFn, schema: dict[str, Any]) -> Any:
    instance = draw(valid(schema))
    containers = [instance] if isinstance(instance, dict | list) else []
    for container in containers:
        children = container.values() if isinstance(container, dict) else container
        containers += [child for child in children if isinstance(child, dict | list) and child]
    if not containers:
        return draw(st.sampled_from(MISSES))
    container = draw(st.sampled_from(containers))
    if isinstance(container, list):
        container[draw(st.integers(0, len(container) - 1))] = draw(st.sampled_from(MISSES) | json_values)
        return instance
    action = draw(st.sampled_from(["replace", "drop", "add"]))
    if action == "add" or not container:
        container[draw(st.sampled_from(["extra", "nextCursor", "version"]))] = draw(json_values)
    elif action == "drop":
        del container[draw(st.sampled_from(sorted(container)))]
    else:
        container[draw(st.sampled_from(sorted(container)))] = draw(st.sampled_from(MISSES) | json_values)
    return instance


def schemas() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for profile in PROFILES:
        catalog = build_catalog(load_config(profile.config), LOOKUPS)
        for name, tool in catalog.tools.items():
            found.append((f"{name} input", dict(tool.tool.input_schema)))
            found.append((f"{name} output", dict(tool.tool.output_schema or {})))
    return found


SCHEMAS = schemas()
NEAR = {label: near(schema) for label, schema in SCHEMAS}
"""Each schema's strategy, built once: building it per example (regexes included) took most of the run."""


def _checks(schema: dict[str, Any]) -> tuple[Check, Validator]:
    check = compile_check(schema)
    assert check is not None
    return check, validator(schema)


CHECKS = {label: _checks(schema) for label, schema in SCHEMAS}
"""Each schema's compiled check beside jsonschema's validator, built once."""


@pytest.mark.parametrize(("label", "schema"), SCHEMAS, ids=[label for label, _ in SCHEMAS])
def test_every_published_schema_compiles(label: str, schema: dict[str, Any]) -> None:
    assert compile_check(schema) is not None, label


@pytest.mark.parametrize(("label", "schema"), SCHEMAS, ids=[label for label, _ in SCHEMAS])
@settings(derandomize=True, deadline=None)  # as many examples as the profile (tests/conftest.py)
@given(data=st.data())
def test_a_compiled_check_agrees_with_jsonschema(label: str, schema: dict[str, Any], data: st.DataObject) -> None:
    check, reference = CHECKS[label]
    instance = data.draw(NEAR[label])
    assert check(instance) == reference.is_valid(instance)


FORMATS = sorted(ASSERTED_FORMATS | {"date-time", "time", "uri", "hostname", "duration", "made-up"})
NEAR_FORMATS = st.sampled_from(
    [
        "2026-12-06",
        "2026-13-06",
        "2026-12-06T10:00:00Z",
        "12:00:00",
        "12:00:00Z",
        "a@b",
        "ab",
        "10.0.0.1",
        "10.0.0.256",
        "::1",
        "xn--bcher-kva.example",
        "-bad-.example",
        "[a-z",
        "[a-z]",
        "2c4a1e0c-6f0f-4a4e-9a0e-8d2b0f6a1c3d",
        "2c4a1e0c",
        "https://example.com/x",
        "P1D",
    ]
)


@pytest.mark.parametrize("name", FORMATS)
@settings(derandomize=True, deadline=None)
@given(instance=NEAR_FORMATS | json_values)
def test_a_format_is_checked_alike_compiled_and_by_jsonschema(name: str, instance: Any) -> None:
    schema = {"type": ["string", "integer", "null", "boolean", "number", "array", "object"], "format": name}
    check = compile_check(schema)
    assert check is not None
    assert check(instance) == validator(schema).is_valid(instance)


def test_only_the_asserted_formats_are_checked_others_are_annotations() -> None:
    refused = {
        "date": "2026-13-06",
        "email": "ab",
        "ipv4": "10.0.0.256",
        "ipv6": "10.0.0.1",
        "regex": "[a-z",
        "uuid": "2c4a1e0c",
    }
    for name, value in refused.items():
        assert not compile_check({"type": "string", "format": name})(value), name  # type: ignore[misc]
        assert not validator({"type": "string", "format": name}).is_valid(value), name
    # Not asserted, whatever packages jsonschema finds installed: a 2020-12 "time" was checked as draft 3's
    # %H:%M:%S (refusing an RFC 3339 time with its offset), "date-time" only with rfc3339-validator installed.
    for name, value in {"time": "12:00:00Z", "date-time": "not a time", "uri": "::", "made-up": "x"}.items():
        assert compile_check({"type": "string", "format": name})(value), name  # type: ignore[misc]
        assert validator({"type": "string", "format": name}).is_valid(value), name
    assert compile_check({"type": "string", "format": ["a list"]}) is not None  # an annotation, not a crash


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "string", "$ref": "#/x"},
        {"anyOf": [{"type": "string"}]},
        {"type": "object", "additionalProperties": {"type": "string"}},
        {"enum": [1, "a"]},
        {"type": "integer", "minimum": "3"},
    ],
)
def test_a_keyword_outside_the_subset_leaves_the_schema_to_jsonschema(schema: dict[str, Any]) -> None:
    assert compile_check(schema) is None


@pytest.mark.parametrize("pattern", ["^[A-Za-z0-9_.-]{1,64}$", "[A-Za-z0-9_.-]{1,64}", "^a|b$"])
def test_a_pattern_matches_whole_values_in_the_compiled_check_and_in_jsonschema(pattern: str) -> None:
    schema = {"type": "string", "pattern": pattern}
    fallback = {**schema, "not": {"const": "never"}}  # outside the compiled subset: jsonschema answers
    assert compile_check(fallback) is None
    for checks_valid in (compile_check(schema), validator(schema).is_valid, validator(fallback).is_valid):
        assert checks_valid is not None
        assert not checks_valid("tn_load04\n")
        assert not checks_valid("tn load04")
    assert compile_check({"type": "string", "pattern": anchored(pattern)}) is not None


def test_published_patterns_are_anchored_so_a_search_reads_them_as_whole_value_matches() -> None:
    assert anchored("^[a-z]{1,3}$") == "^[a-z]{1,3}$"
    assert anchored("[a-z]{1,3}") == "^(?:[a-z]{1,3})$"
    assert anchored("^a|b$") == "^(?:^a|b$)$"
    schema = {"type": "object", "properties": {"pattern": {"type": "string", "pattern": "x+"}}, "enum": ["[a]"]}
    assert published(schema) == {
        "type": "object",
        "properties": {"pattern": {"type": "string", "pattern": "^(?:x+)$"}},
        "enum": ["[a]"],
    }
    for _, schema in SCHEMAS:
        _all_patterns_anchored(schema)


def _all_patterns_anchored(schema: Any) -> None:
    if isinstance(schema, dict):
        pattern = schema.get("pattern")
        assert not isinstance(pattern, str) or anchored(pattern) == pattern, pattern
        for value in schema.values():
            _all_patterns_anchored(value)
