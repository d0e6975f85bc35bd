"""The mapping's small interpreters: lookups from a table or a list of objects, and the version's output name."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.catalog.published import named_version
from gateway.config import ConfigError, Lookup, load_config, parse_config

LIST_LOOKUP = Lookup.model_validate({"call": {"action": "templates"}, "key": "id", "value": "meta.rows"})


def test_a_lookup_reads_a_list_of_objects_by_its_key_and_value_paths() -> None:
    items = [{"id": "blank", "meta": {"rows": 0}}, {"id": 7, "meta": {"rows": 40}}]
    assert LIST_LOOKUP.table_of(items) == {"blank": 0, "7": 40}


@pytest.mark.parametrize(
    "data",
    [
        {"blank": 0},
        [{"id": "blank"}],
        [{"id": True, "meta": {"rows": 1}}],
        [{"id": "a", "meta": {"rows": 1}}, {"id": "a", "meta": {"rows": 2}}],
        ["blank"],
    ],
    ids=["an-object", "no-value", "a-boolean-key", "a-repeated-key", "not-objects"],
)
def test_a_list_lookup_refuses_data_of_another_shape(data: Any) -> None:
    assert LIST_LOOKUP.table_of(data) is None


def test_a_table_lookup_refuses_a_list() -> None:
    assert Lookup.model_validate({"call": {"action": "fixtures"}}).table_of([{"id": "a"}]) is None


@pytest.mark.parametrize(
    "lookup",
    [
        {"call": {"action": "templates"}, "key": "id"},
        {"values": {"a": 1}, "key": "id", "value": "rows"},
    ],
    ids=["key-without-value", "key-on-inline-values"],
)
def test_a_half_configured_list_lookup_names_the_lookup(lookup: dict[str, Any]) -> None:
    data = load_config().model_dump(by_alias=True, exclude_none=True)
    data["lookups"]["fixtures"] = lookup
    with pytest.raises(ConfigError) as raised:
        parse_config(data)
    assert "lookups.fixtures" in str(raised.value)


def test_the_version_goes_out_under_its_configured_name_keeping_the_order() -> None:
    body = {"planId": "pl_1", "version": 3, "replayed": False}
    assert list(named_version(body, "generation").items()) == [
        ("planId", "pl_1"),
        ("generation", 3),
        ("replayed", False),
    ]
    assert named_version(body, "version") is body


def test_a_version_name_that_is_already_an_output_field_names_the_key() -> None:
    data = load_config().model_dump(by_alias=True, exclude_none=True)
    data["tools"]["preview_tenant_reset"]["target"]["version_output"] = "rowsDeleted"
    with pytest.raises(ConfigError) as raised:
        parse_config(data)
    assert "version_output" in str(raised.value)
