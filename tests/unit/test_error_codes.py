"""Error codes: the two target codes are spelled with the target's noun, and read back to the same code."""

from __future__ import annotations

import pytest

from gateway.errors import Code, ToolError
from gateway.write.steps import stored_error


@pytest.mark.parametrize(("noun", "wire"), [("tenant", "tenant_not_found"), ("database", "database_not_found")])
def test_a_target_code_is_spelled_with_the_noun_and_parsed_back(noun: str, wire: str) -> None:
    err = ToolError(Code.TARGET_NOT_FOUND, "No such thing.", noun=noun)
    assert err.body()["code"] == wire
    assert Code.parse(wire) == (Code.TARGET_NOT_FOUND, noun)
    assert ToolError(wire, "again").wire_code == wire


def test_the_other_codes_keep_their_one_spelling() -> None:
    assert Code.parse("plan_not_found") == (Code.PLAN_NOT_FOUND, None)
    assert ToolError(Code.PLAN_STALE, "moved", noun="database").wire_code == "plan_stale"


def test_a_target_code_without_a_noun_or_a_foreign_code_is_refused() -> None:
    with pytest.raises(ValueError):
        ToolError(Code.TARGET_PROTECTED, "protected")
    with pytest.raises(ValueError):
        ToolError("no_such_code", "?")


def test_a_stored_refusal_with_a_noun_replays_with_the_same_spelling() -> None:
    from gateway.records import KeyRecord

    record = KeyRecord("c", "key-1234", "pl_x", "db1", "error", result={"code": "database_protected", "message": "m"})
    assert ToolError(**stored_error(record)).wire_code == "database_protected"
