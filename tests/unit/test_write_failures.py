"""Failures inside the write path once a key is claimed: the key never stays in flight, the caller gets a coded
answer (never a JSON-RPC error), and the audit holds the decision."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gateway.audit import entries
from gateway.records import Reply, bounded_json
from gateway.write.audited import AuditedCall
from tests.support.clients import Answers, connect, error_body, error_code, new_key, preview, running_gateway
from tests.support.configs import gateway_config
from tests.support.profiles import Profile

pytestmark = pytest.mark.anyio


def optional_note_in_the_payload(profile: Profile) -> Any:
    """A config an operator could write: an optional input that only the write's payload uses."""

    def change(tools: dict[str, Any]) -> None:
        tools[profile.preview_tool]["inputs"]["note"] = {"schema": {"type": "string"}, "required": False}
        tools[profile.write_tool]["call"]["payload"]["note"] = "{note}"

    return change


async def test_a_payload_that_cannot_be_built_releases_the_key_and_writes_nothing(
    tmp_path: Path, profile: Profile, era: str, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "backend.db"
    config = gateway_config(
        profile, db, *profile.seed_demo, state_dir=tmp_path, tools=optional_note_in_the_payload(profile)
    )
    async with running_gateway(config, backend_in_process=True) as gw, connect(gw, era, Answers()) as client:
        plan = await preview(client, profile)  # without the optional note
        before = profile.write_count(db), profile.snapshot(db, profile.main)
        args = {"planId": plan["planId"], "idempotencyKey": new_key()}
        first = await client.call_tool(profile.write_tool, args)
        record = await gw.store.get_record("local", args["idempotencyKey"])
        retry = await client.call_tool(profile.write_tool, args)
        audited = [(e.outcome, e.code) async for e in gw.store.audit_entries()]
    assert error_code(first) == "internal_error"
    assert error_body(first)["nextTool"] == profile.preview_tool
    assert record is None  # released: the key is free, not in flight
    assert error_code(retry) == "internal_error"  # tried again, not request_in_progress
    assert (profile.write_count(db), profile.snapshot(db, profile.main)) == before
    assert audited == [("refused", "internal_error")] * 2
    # The operator's log has the fault's traceback (an internal bug must be findable); the caller's answer has none.
    faults = [r for r in caplog.records if "failed before the backend call" in r.getMessage()]
    assert faults and all(r.exc_info is not None for r in faults)
    assert "Traceback" not in str(first.content) and "KeyError" not in str(first.content)


def test_json_nested_past_the_cap_is_malformed_without_recursing() -> None:
    deep = "[" * 100_000 + "1" + "]" * 100_000
    assert bounded_json(deep, 16) is None
    assert Reply(False, deep).json() is None
    sixteen: Any = []
    for _ in range(15):
        sixteen = [sixteen]
    assert bounded_json("[" * 16 + "]" * 16, 16) == sixteen
    assert bounded_json("[" * 17 + "]" * 17, 16) is None
    assert bounded_json('{"a": "[[[[[[[[", "b": "\\\\", "c": "\\"{{{{"}', 2) == {
        "a": "[[[[[[[[",
        "b": "\\",
        "c": '"{{{{',
    }
    assert bounded_json('[[""], "", [[]]]', 3) == [[""], "", [[]]]
    assert bounded_json('[[""], "", [[[]]]]', 3) is None
    assert bounded_json("[1, 2", 16) is None


async def test_an_entry_sealed_with_the_keys_outcome_is_not_stored_again(tmp_path: Path, profile: Profile) -> None:
    config = gateway_config(profile, tmp_path / "backend.db", *profile.seed_demo, state_dir=tmp_path)
    async with running_gateway(config, backend_in_process=True) as gw:
        call = AuditedCall(gw, profile.write_tool, "local")
        call.note(target=profile.main)
        sealed = call.seal(entries.applied)
        # the decision's entry went with the key: nothing more
        await call.audit(lambda facts, at: entries.refused(facts, at, "internal_error"))
        stored = [entry async for entry in gw.store.audit_entries()]
        with pytest.raises(RuntimeError):
            call.seal(entries.applied)
    assert (sealed.outcome, sealed.target, stored) == ("applied", profile.main, [])
