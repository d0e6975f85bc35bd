"""The terminal client's argument syntax: ``key=value`` is a string, ``key:=json`` any JSON value."""

from __future__ import annotations

import pytest

from gateway.terminal import UsageError, parse_pairs


def test_arguments_are_strings_unless_marked_as_json() -> None:
    assert parse_pairs(["tenantId=tn_a", "limit:=5", "cursor=a=b"]) == {"tenantId": "tn_a", "limit": 5, "cursor": "a=b"}
    with pytest.raises(UsageError):
        parse_pairs(["limit:=five"])
    with pytest.raises(UsageError):
        parse_pairs(["tenantId"])
