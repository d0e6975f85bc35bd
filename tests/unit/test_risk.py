"""Every published tool carries its risk in the shape of SEP-2793 (under its ``_meta``: the SDKs' annotation models
drop fields they do not know), derived from the config alone, and never says anything its four hints contradict.

Planned tools: a reset is destructive, cannot be undone and reaches one target; ``approvers`` and ``four_eyes``
(the tool's own or a rule's) make the recommendation ``multi``. Pass-through tools: what the operator states under
``risk``, the worst case where it states nothing, never what the backend says of its own tool."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mcp_types as types
import pytest

from gateway.catalog.published import build_catalog
from gateway.catalog.risk import RISK_META
from gateway.config import ConfigError, parse_config
from gateway.config.risk import contradictions
from gateway.config.statements import StatementExecuteTool
from tests.support.approvals import approvals_section, url_mode
from tests.support.clients import Clock, connect, running_gateway
from tests.support.configs import config_data, together_data
from tests.support.profiles import TENANTS, Profile
from tests.support.sql_double import Switches, sql_gateway
from tests.support.sql_double import config_data as sql_config

pytestmark = pytest.mark.anyio
LOOKUPS = {"fixtures": {"empty": 0}}
WRITE_SEPS = ("riskLevel", "category", "blastRadius", "reversibility", "approvalRecommendation")


def published_risk(tool: types.Tool) -> dict[str, Any]:
    risk: dict[str, Any] = (tool.meta or {})[RISK_META]
    return risk


def hints_of(tool: types.Tool) -> dict[str, Any]:
    assert tool.annotations is not None
    return tool.annotations.model_dump(by_alias=True, exclude_none=True)


async def listed(data: dict[str, Any], era: str) -> dict[str, types.Tool]:
    """The tools a real SDK client lists from a gateway made of ``data``."""
    async with (
        running_gateway(parse_config(data), Clock(), backend_in_process=True) as gw,
        connect(gw, era) as client,
    ):
        return {tool.name: tool for tool in (await client.list_tools()).tools}


def four_eyes_rule(profile: Profile) -> Any:
    def change(tools: dict[str, Any]) -> None:
        tools[profile.write_tool]["approval"] = [
            {"name": "big", "when": "true", "mode": "url", "approvers": 2, "four_eyes": False}
        ]

    return change


async def test_every_published_tool_states_its_risk_and_never_contradicts_its_hints(
    profile: Profile, tmp_path: Path, era: str
) -> None:
    configs = {
        "default": config_data(profile, tmp_path / "a.db", *profile.seed_demo, state_dir=tmp_path / "a"),
        "two approvers": config_data(
            profile, tmp_path / "b.db", state_dir=tmp_path / "b", tools=url_mode(profile.write_tool, approvers=2)
        ),
        "a rule asks two": config_data(
            profile, tmp_path / "c.db", state_dir=tmp_path / "c", tools=four_eyes_rule(profile)
        ),
        "two backends, pass-through": together_data(
            profile, tmp_path / "d.db", *profile.seed_demo, state_dir=tmp_path / "d"
        ),
    }
    for data in (configs["two approvers"], configs["a rule asks two"]):
        data["approvals"] = approvals_section("https://127.0.0.1:8443")
    seen: dict[str, dict[str, dict[str, Any]]] = {}
    for name, data in configs.items():
        tools = await listed(data, era)
        seen[name] = {tool: published_risk(each) for tool, each in tools.items()}
        for tool, each in tools.items():
            assert contradictions(hints_of(each), published_risk(each)) == [], (name, tool)
            assert set(published_risk(each)) >= {"riskLevel", "category", "approvalRecommendation"}, (name, tool)
    default = seen["default"]
    assert {default[tool]["category"] for tool in (profile.list_tool, profile.preview_tool)} == {"read"}
    assert {key: default[profile.write_tool][key] for key in WRITE_SEPS} == {
        "riskLevel": "high",
        "category": "destroy",
        "blastRadius": "item",
        "reversibility": "none",
        "approvalRecommendation": "single",
    }
    assert seen["two approvers"][profile.write_tool]["approvalRecommendation"] == "multi"
    assert seen["a rule asks two"][profile.write_tool]["approvalRecommendation"] == "multi"
    passed = seen["two backends, pass-through"]
    assert passed["flag_history"] == {"riskLevel": "low", "category": "read", "approvalRecommendation": "none"}
    # A pass-through write whose operator stated nothing of its reach: the worst case (describe_flag is not
    # destructive, so it changes what it names without deleting).
    assert {key: passed["describe_flag"][key] for key in WRITE_SEPS} == {
        "riskLevel": "medium",
        "category": "mutate",
        "blastRadius": "global",
        "reversibility": "manual",
        "approvalRecommendation": "single",
    }


def backend_tool(name: str, claims: dict[str, Any]) -> types.Tool:
    """A backend's own tool that says of itself that it is harmless."""
    return types.Tool.model_validate(
        {
            "name": name,
            "inputSchema": {"type": "object", "properties": {"id": {"type": "string"}}},
            "outputSchema": {"type": "object", "properties": {}},
            "annotations": {"readOnlyHint": True, "destructiveHint": False, "riskLevel": "low"},
            "_meta": {RISK_META: claims},
        }
    )


def passthrough(risk: dict[str, Any] | None, **hints: bool) -> dict[str, Any]:
    data = config_data(TENANTS, Path("unused.db"), state_dir=Path("unused"))
    tool = {
        "kind": "passthrough",
        "source": "purge",
        "description": "Purge a namespace.",
        "annotations": {"read_only": False, "destructive": True, "idempotent": False, "open_world": False, **hints},
        "target_argument": "id",
    }
    data["tools"]["purge_namespace"] = {**tool, **({"risk": risk} if risk is not None else {})}
    return data


def test_a_pass_through_tool_publishes_its_operators_risk_never_the_backends_claims() -> None:
    claims = {"riskLevel": "low", "category": "read", "blastRadius": "item", "reversibility": "auto"}
    listing = {"default": [backend_tool("purge", claims)]}
    unstated = build_catalog(parse_config(passthrough(None)), LOOKUPS, listing).tools["purge_namespace"]
    stated = {"blast_radius": "namespace", "reversibility": "manual", "level": "critical", "side_effects": ["email"]}
    decided = build_catalog(parse_config(passthrough(stated)), LOOKUPS, listing).tools["purge_namespace"]
    assert published_risk(unstated.tool) == {
        "riskLevel": "critical",  # destructive, and how far it reaches nobody said: the worst case
        "category": "destroy",
        "blastRadius": "global",
        "reversibility": "none",
        "approvalRecommendation": "single",
    }
    assert published_risk(decided.tool) == {
        "riskLevel": "critical",
        "category": "destroy",
        "blastRadius": "namespace",
        "reversibility": "manual",
        "sideEffects": ["email"],
        "approvalRecommendation": "single",
    }
    assert hints_of(decided.tool)["readOnlyHint"] is False  # the operator's hints, not the backend's


@pytest.mark.parametrize(
    ("risk", "hints", "named"),
    [
        ({"category": "read"}, {}, "risk.category"),  # a write is no read
        ({"category": "delete"}, {"destructive": False}, "risk.category"),  # deleting is destructive
        ({"reversibility": "auto"}, {}, "risk.reversibility"),  # a destructive write does not undo itself
        ({"blast_radius": "item"}, {"read_only": True, "destructive": False}, "risk.blast_radius"),
        ({"category": "mutate"}, {"read_only": True, "destructive": False}, "risk.category"),
    ],
)
def test_a_stated_risk_that_contradicts_the_tools_hints_is_refused(
    risk: dict[str, Any], hints: dict[str, bool], named: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        parse_config(passthrough(risk, **hints))
    assert f"tools.purge_namespace: {named} " in str(refused.value)


def test_the_rules_of_agreement_catch_each_contradiction() -> None:
    write = {"readOnlyHint": False, "destructiveHint": True}
    read = {"readOnlyHint": True, "destructiveHint": False}
    assert (
        contradictions(write, {"category": "destroy", "reversibility": "none", "approvalRecommendation": "single"})
        == []
    )
    assert [field for field, _ in contradictions(write, {"approvalRecommendation": "none"})] == [
        "approvalRecommendation"
    ]
    assert [field for field, _ in contradictions(read, {"approvalRecommendation": "multi"})] == [
        "approvalRecommendation"
    ]
    assert [field for field, _ in contradictions(read, {"reversibility": "none"})] == ["reversibility"]
    assert [field for field, _ in contradictions(write, {"category": "observe"})] == ["category"]


async def test_a_statement_executing_servers_tools_state_their_risk_and_agree_with_their_hints(
    tmp_path: Path, database: Path, switches: Switches
) -> None:
    """A server that runs any SQL it is given: reads are low; its execute tool's reach is not known (a statement
    may touch every row of its tables), so the worst case, and DDL and TRUNCATE need four eyes: multi."""
    async with (
        sql_gateway(sql_config(tmp_path / "state"), database, switches) as gw,
        connect(gw, "2026-07-28") as client,
    ):
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    for name, tool in tools.items():
        assert contradictions(hints_of(tool), published_risk(tool)) == [], name
    assert published_risk(tools["query"])["category"] == "read"
    assert {key: published_risk(tools["execute_statement"])[key] for key in WRITE_SEPS} == {
        "riskLevel": "critical",
        "category": "destroy",
        "blastRadius": "global",
        "reversibility": "none",
        "approvalRecommendation": "single",
    }


def test_a_statement_tool_that_may_run_ddl_recommends_several_people() -> None:
    ddl = StatementExecuteTool.model_validate(
        {"kind": "statement_execute", "preview": "p", "classes": ["delete", "ddl"]}
    )
    dml = StatementExecuteTool.model_validate({"kind": "statement_execute", "preview": "p", "four_eyes_classes": []})
    assert (ddl.approval_recommendation(), dml.approval_recommendation()) == ("multi", "single")
