"""Approval by risk: ordered CEL rules choose each plan's mode at preview time, budgets count writes, approvers
decide in batches. In process, through real previews and writes in both eras (a webhook that is down, a socket:
tests/system/test_approval_rules.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import mcp_types as types
import pytest

from gateway.approvals.lifecycle import approval_id_for
from gateway.config import ConfigError, parse_config
from gateway.http.app import build_app
from gateway.runtime import Gateway
from tests.support.approvals import PageUser, approvals_section, csrf_of
from tests.support.clients import connect, error_body, error_code, new_key, preview, running_gateway
from tests.support.configs import config_data
from tests.support.profiles import TENANTS

pytestmark = pytest.mark.anyio
BOB_TOKEN = {"issuer": "static", "subject": "bob", "display": "Bob"}
"""bob as the audit keeps him: his approver token's issuer and subject, its configured name beside them."""
PAGE = "https://127.0.0.1:8443"
SIZE_RULES: list[dict[str, Any]] = [
    {"name": "budget", "when": "writes.caller.hour >= 50", "mode": "deny"},
    {"name": "busy", "when": "writes.caller.hour >= 5", "mode": "typed"},
    {
        "name": "huge",
        "when": 'summary.rowsDeleted > 1000 || target.id.startsWith("tn_load")',
        "mode": "url",
        "approvers": 2,
    },
    {"name": "sizeable", "when": "summary.rowsDeleted > 100", "mode": "typed"},
]


def config(tmp: Path, rules: list[dict[str, Any]], *seed: str, **approvals: Any) -> Any:
    def with_rules(tools: dict[str, Any]) -> None:
        tools[TENANTS.write_tool].update(approval=rules, prompt_timeout_seconds=2)

    data = config_data(
        TENANTS, tmp / "backend.db", *(seed or TENANTS.seed_demo), state_dir=tmp / "state", tools=with_rules
    )
    data["approvals"] = {**approvals_section(PAGE), **approvals}
    data["http"] = {"allowed_origins": [PAGE]}
    return parse_config(data)


@pytest.fixture
async def sized(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Gateway]:
    """A fresh gateway per test: every plan issued counts against the budget rules."""
    async with running_gateway(config(tmp_path_factory.mktemp("sized"), SIZE_RULES), backend_in_process=True) as gw:
        yield gw


@pytest.mark.parametrize(
    ("target", "fixture", "mode", "rule"),
    [
        ("tn_load04", "empty", "url", "huge"),
        ("tn_checkout01", "smoke", "typed", "sizeable"),
        ("tn_search02", "empty", "form", None),
        ("tn_billing03", "load", "form", None),
    ],
)
async def test_the_first_rule_that_holds_picks_the_mode_at_preview(
    sized: Gateway, era: str, target: str, fixture: str, mode: str, rule: str | None
) -> None:
    async with connect(sized, era) as client:
        result = await client.call_tool(TENANTS.preview_tool, {"tenantId": target, "fixture": fixture})
    assert not result.is_error, result.content
    assert (result.structured_content or {})["approval"] == {"mode": mode, **({"rule": rule} if rule else {})}
    exposition = sized.metrics.exposition().decode()
    assert f'gateway_plans_total{{mode="{mode}",rule="{rule or "(tool)"}",tool="reset_tenant"}}' in exposition


async def test_a_rule_on_a_field_the_target_lacks_fails_closed_and_says_so(tmp_path: Path) -> None:
    """A weak rule reading a field the backend does not report gives the stricter mode after it, and the
    preview's output, the metrics and the applied write's audit entry name the rule; one write."""
    rules = [
        {"name": "sandbox", "when": 'target.tier == "sandbox"', "mode": "form"},
        {"name": "later", "when": "summary.rowsDeleted > 100000", "mode": "typed"},
    ]
    async with running_gateway(config(tmp_path, rules), backend_in_process=True) as gw:

        async def types_the_target(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
            assert "confirmTarget" in str(params)  # typed: the stricter mode was asked for
            return types.ElicitResult(action="accept", content={"confirmTarget": "tn_search02"})

        async with connect(gw, "2025-11-25", types_the_target) as client:
            plan = await preview(client, TENANTS, "tn_search02")
            assert plan["approval"] == {"mode": "typed", "rule": "later", "unevaluable": "sandbox"}
            key = new_key()
            result = await client.call_tool(TENANTS.write_tool, {"planId": plan["planId"], "idempotencyKey": key})
        assert not result.is_error, result.content
        exposition = gw.metrics.exposition().decode()
        assert 'gateway_rules_failed_closed_total{rule="sandbox",tool="reset_tenant"} 1.0' in exposition
        entries = [entry async for entry in gw.store.audit_entries()]
        applied = [entry for entry in entries if entry.outcome == "applied"]
        assert [entry.extra.get("unevaluable") for entry in applied] == ["sandbox"]
    assert TENANTS.write_count(tmp_path / "backend.db") == 1


async def test_the_mode_is_fixed_with_the_plan_and_a_weaker_config_later_cannot_change_it(tmp_path: Path) -> None:
    store = {"store": f"sqlite:{tmp_path}/gateway.db"}
    strict = config(tmp_path, [{"name": "all", "when": "true", "mode": "url"}])
    lenient = config(tmp_path, [])
    strict = strict.model_copy(update={"gateway": strict.gateway.model_copy(update=store)})
    lenient = lenient.model_copy(update={"gateway": lenient.gateway.model_copy(update=store)})
    async with running_gateway(strict, backend_in_process=True) as first, connect(first, "2025-11-25") as client:
        plan = await preview(client, TENANTS, "tn_search02")
    assert plan["approval"] == {"mode": "url", "rule": "all"}

    async def agent_says_yes(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"confirm": True})

    async with (
        running_gateway(lenient, backend_in_process=True) as second,  # the rule is gone from the config
        connect(second, "2026-07-28", agent_says_yes) as client,
    ):
        result = await client.call_tool(TENANTS.write_tool, {"planId": plan["planId"], "idempotencyKey": new_key()})
    assert error_code(result) == "approval_pending"  # still the plan's url mode, whatever the agent answers
    assert TENANTS.write_count(tmp_path / "backend.db") == 0


async def test_an_agent_looping_on_resets_meets_the_budget_rules_at_their_counts(tmp_path: Path) -> None:
    rules = SIZE_RULES[:2]
    modes: list[str] = []
    async with running_gateway(config(tmp_path, rules), backend_in_process=True) as gw:
        for number in range(60):
            target = ("tn_search02", "tn_billing03")[number % 2]

            async def says_yes(
                context: Any, params: types.ElicitRequestParams, target: str = target
            ) -> types.ElicitResult:
                return types.ElicitResult(action="accept", content={"confirm": True, "confirmTarget": target})

            async with connect(gw, ("2025-11-25", "2026-07-28")[number % 2], says_yes) as client:
                planned = await client.call_tool(TENANTS.preview_tool, {"tenantId": target, "fixture": "empty"})
                if planned.is_error:
                    modes.append(error_code(planned))
                    continue
                body = planned.structured_content or {}
                modes.append(body["approval"]["mode"])
                done = await client.call_tool(
                    TENANTS.write_tool, {"planId": body["planId"], "idempotencyKey": new_key()}
                )
                assert not done.is_error, done.content
        denials = [entry async for entry in gw.store.audit_entries() if entry.outcome == "denied"]
        exposition = gw.metrics.exposition().decode()
    assert modes == ["form"] * 5 + ["typed"] * 45 + ["denied"] * 10
    assert TENANTS.write_count(tmp_path / "backend.db") == 50
    assert len(denials) == 10  # every deny is evidence, naming its rule and mode
    assert {(entry.tool, entry.extra["rule"], entry.extra["mode"]) for entry in denials} == {
        (TENANTS.write_tool, "budget", "deny")
    }
    assert {entry.target for entry in denials} == {"tn_search02", "tn_billing03"}
    assert 'gateway_denials_total{rule="budget",tool="reset_tenant"} 10.0' in exposition


async def test_a_batch_approval_of_five_plans_applies_five_writes_each_audited(tmp_path: Path) -> None:
    rules = [{"name": "everything", "when": "true", "mode": "url"}]
    async with running_gateway(config(tmp_path, rules, "--seed-tenants", "8"), backend_in_process=True) as gw:
        targets = [f"tn_bulk{n:06d}" for n in range(1, 6)]
        async with connect(gw, "2026-07-28") as client:
            calls = []
            for target in targets:
                plan = await preview(client, TENANTS, target)
                args = {"planId": plan["planId"], "idempotencyKey": new_key()}
                assert error_code(await client.call_tool(TENANTS.write_tool, args)) == "approval_pending"
                calls.append(args)
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=build_app(gw)), base_url=PAGE) as http:
                user = PageUser(http, PAGE)
                await user.sign_in("bob")
                listing = await http.get("/approvals")
                chosen = [approval_id_for(args["planId"]) for args in calls]
                assert all(approval_id in listing.text for approval_id in chosen)
                form = {"csrf": csrf_of(listing.text), "decision": "approve", "approval": chosen}
                decided = await http.post("/approvals", data=form, headers={"Origin": PAGE})
                assert decided.status_code == 200 and decided.text.count(": approved") == 5
                metrics = (await http.get("/metrics")).text
            results = [await client.call_tool(TENANTS.write_tool, args) for args in calls]
        assert [result.is_error for result in results] == [False] * 5
        assert TENANTS.write_count(tmp_path / "backend.db") == 5
        entries = [entry async for entry in gw.store.audit_entries()]
        applied = [entry for entry in entries if entry.outcome == "applied"]
        decisions = [entry for entry in entries if entry.outcome == "approval"]
        assert [entry.extra["approvers"] for entry in applied] == [[BOB_TOKEN]] * 5
        assert all(entry.extra["rule"] == "everything" for entry in applied)
        assert sorted(entry.extra["approval"] for entry in decisions) == sorted(chosen)
        assert "gateway_approvals_pending 0.0" in metrics
        assert 'gateway_approval_decision_seconds_count{decision="approved"} 5.0' in metrics


def test_a_rule_that_does_not_compile_stops_the_config_naming_its_key(tmp_path: Path) -> None:
    for when, words in (("summary.rowsDeleted >", "Syntax error"), ("budget.hour > 5", "budget")):
        with pytest.raises(ConfigError) as raised:
            config(tmp_path, [{"name": "bad", "when": when, "mode": "url"}])
        assert "tools.reset_tenant.approval.0.when" in str(raised.value) and words in str(raised.value)


async def says_yes(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    """The agent answering its own form: yes."""
    return types.ElicitResult(action="accept", content={"confirm": True})


async def test_previewing_ahead_of_a_budget_buys_nothing(tmp_path: Path) -> None:
    """The attack: with `writes.caller.hour >= 2 -> deny`, an agent previews four plans while its counters are
    zero, then applies them all with its own yes. A plan counts from its issue on: two plans, two writes."""
    rules = [{"name": "spent", "when": "writes.caller.hour >= 2", "mode": "deny"}]

    async with (
        running_gateway(config(tmp_path, rules), backend_in_process=True) as gw,
        connect(gw, "2026-07-28", says_yes) as client,
    ):
        previews = [
            await client.call_tool(TENANTS.preview_tool, {"tenantId": target, "fixture": "empty"})
            for target in ("tn_search02", "tn_billing03", "tn_checkout01", "tn_search02")
        ]
        assert [error_code(each) if each.is_error else "plan" for each in previews] == ["plan"] * 2 + ["denied"] * 2
        for planned in previews[:2]:
            plan = planned.structured_content or {}
            done = await client.call_tool(TENANTS.write_tool, {"planId": plan["planId"], "idempotencyKey": new_key()})
            assert not done.is_error, done.content
    assert TENANTS.write_count(tmp_path / "backend.db") == 2


async def test_a_write_asks_for_the_stricter_mode_its_counters_call_for_now(tmp_path: Path) -> None:
    """A plan issued as `form` is written as `typed` when a budget rule holds at write time: the mode only
    tightens (the plan's own count is not held against it)."""
    rules = [{"name": "busy", "when": "writes.caller.hour >= 1", "mode": "typed"}]
    asked: list[str] = []

    async def answers(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        schema = getattr(params, "requested_schema", None) or {}
        typed = "confirmTarget" in schema.get("properties", {})
        asked.append("typed" if typed else "form")
        return types.ElicitResult(
            action="accept", content={"confirmTarget": "tn_search02"} if typed else {"confirm": True}
        )

    async with (
        running_gateway(config(tmp_path, rules), backend_in_process=True) as gw,
        connect(gw, "2025-11-25", answers) as client,
    ):
        first = await preview(client, TENANTS, "tn_search02")
        assert first["approval"] == {"mode": "form"}  # nothing counted yet
        second = await preview(client, TENANTS, "tn_billing03")
        assert second["approval"] == {"mode": "typed", "rule": "busy"}  # the first plan counts
        done = await client.call_tool(TENANTS.write_tool, {"planId": first["planId"], "idempotencyKey": new_key()})
        assert not done.is_error, done.content
    assert asked == ["typed"]  # the first plan, issued as form, was asked as typed: the second plan counts now
    assert TENANTS.write_count(tmp_path / "backend.db") == 1


async def test_a_budget_that_moved_since_the_preview_denies_the_write_and_writes_nothing(tmp_path: Path) -> None:
    """Other writes (another caller, another replica) fill `writes.all` after the plan was issued: the write is
    refused with `denied` naming the rule, audited, and the backend is unchanged."""
    rules = [{"name": "fleet", "when": "writes.all.hour >= 3", "mode": "deny"}]

    async with (
        running_gateway(config(tmp_path, rules), backend_in_process=True) as gw,
        connect(gw, "2026-07-28", says_yes) as client,
    ):
        plan = await preview(client, TENANTS, "tn_search02")
        for _ in range(3):  # three writes elsewhere since this preview
            await gw.store.count_write(["all"], gw.clock())
        before = TENANTS.write_count(tmp_path / "backend.db")
        result = await client.call_tool(TENANTS.write_tool, {"planId": plan["planId"], "idempotencyKey": new_key()})
        assert error_code(result) == "denied"
        assert error_body(result)["details"]["rule"] == "fleet"
        entries = [entry async for entry in gw.store.audit_entries()]
    assert TENANTS.write_count(tmp_path / "backend.db") == before == 0
    refused = [entry for entry in entries if entry.code == "denied"]
    assert len(refused) == 1 and refused[0].extra["rule"] == "fleet" and refused[0].target == "tn_search02"
