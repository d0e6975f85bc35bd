"""A write action the backend does not have (a typo in the TOML) is an operator's error, found before anyone is
asked: a backend whose refusal of an action that cannot exist states its valid actions (``probe_actions``) gets
neither the write nor its preview published, and both answer one sentence naming the key and the valid actions.
No plan, no prompt, no write. ``check`` refuses the same config (tests/system/test_check.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.backend.actions import IMPOSSIBLE, MAX_ACTIONS, listed_in
from gateway.config import parse_config
from tests.support.clients import Answers, connect, error_body, error_code, new_key, running_gateway
from tests.support.configs import config_data
from tests.support.profiles import TENANTS

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("refusal", "listed"),
    [
        (
            "Unknown action '__gateway_probe_no_such_action__'. Valid actions: list, get, reseed",
            ["list", "get", "reseed"],
        ),
        ("expected one of: 'flags.set', 'flags.get'", ["flags.set", "flags.get"]),
        ('allowed commands are ["backup", "restore"]', ["backup", "restore"]),
        ("Unknown action '__gateway_probe_no_such_action__'", None),  # names no list
        (f"Valid actions: {IMPOSSIBLE}, list", None),  # a list that takes any name is no list
        ("Valid actions: " + ", ".join(f"a{n}" for n in range(MAX_ACTIONS + 1)), None),
        ("no such tenant", None),
    ],
)
def test_the_valid_actions_a_refusal_states_are_read_and_nothing_else(refusal: str, listed: list[str] | None) -> None:
    assert listed_in(refusal) == listed


@given(st.text(max_size=400))
def test_any_refusal_gives_a_bounded_list_of_action_shaped_names_or_none(text: str) -> None:
    found = listed_in(text)
    assert found is None or (0 < len(found) <= MAX_ACTIONS and all(name and len(name) <= 64 for name in found))


async def test_a_misspelled_write_action_is_refused_before_a_plan_or_a_prompt_and_writes_nothing(
    tmp_path: Path, era: str
) -> None:
    db = tmp_path / "backend.db"
    data = config_data(TENANTS, db, *TENANTS.seed_demo, state_dir=tmp_path)
    data["backend"]["probe_actions"] = True
    data["tools"][TENANTS.write_tool]["call"]["action"] = "reseedd"
    answers = Answers()
    async with running_gateway(parse_config(data), backend_in_process=True) as gw, connect(gw, era, answers) as client:
        listed = {tool.name for tool in (await client.list_tools()).tools}
        planned = await client.call_tool(TENANTS.preview_tool, TENANTS.preview_args())
        written = await client.call_tool(TENANTS.write_tool, {"planId": "pl_" + "a" * 22, "idempotencyKey": new_key()})
        read = await client.call_tool(TENANTS.list_tool, {})
    assert TENANTS.list_tool in listed and not {TENANTS.preview_tool, TENANTS.write_tool} & listed
    for refused in (planned, written):
        assert error_code(refused) == "backend_error"
        message = error_body(refused)["message"]
        assert f'tools.{TENANTS.write_tool}.call.action: "reseedd" is not one of the backend\'s actions' in message
        assert '"reseed"' in message and "operator must fix its config" in message
    assert not read.is_error  # the reads are the backend's and still work
    assert answers.prompts == [] and TENANTS.write_count(db) == 0
