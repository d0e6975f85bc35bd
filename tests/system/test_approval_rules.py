"""Approval rules against real processes: budgets shared by three replicas on Redis, a signed webhook reaching a
real receiver and one that is down holding no call up, approvers deciding from the terminal, and ``check --explain``
naming the rule a plan would hit."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.approvals.lifecycle import approval_id_for
from gateway.config import parse_config
from tests.support.approvals import TOKENS, approvals_section
from tests.support.asgi import serve_asgi
from tests.support.clients import Answers, connect, error_body, error_code, new_key, preview, running_gateway
from tests.support.configs import config_data, write_toml
from tests.support.processes import free_port, http_backend, serve
from tests.support.profiles import TENANTS
from tests.support.terminal import at_a_terminal

pytestmark = pytest.mark.anyio
SECRET = "webhook-signing-secret-for-tests"


def rules_config(
    tmp: Path, name: str, rules: list[dict[str, Any]], store: str, backend_port: int, **extra: Any
) -> Path:
    def with_rules(tools: dict[str, Any]) -> None:
        tools[TENANTS.write_tool].update(approval=rules, prompt_timeout_seconds=5)

    backend = {"transport": "http", "url": f"http://127.0.0.1:{backend_port}/mcp"}
    data = config_data(
        TENANTS, tmp / "backend.db", store=store, state_dir=tmp / "state", backend=backend, tools=with_rules
    )
    data["approvals"] = {**approvals_section(extra.pop("public_url", "http://127.0.0.1:1")), **extra}
    return write_toml(data, tmp / f"{name}.toml")


@asynccontextmanager
async def three_replicas(tmp_path: Path, rules: list[dict[str, Any]], redis_url: str) -> AsyncIterator[list[int]]:
    """Three gateways sharing Redis in front of one HTTP backend with four bulk tenants: their ports."""
    backend_port, ports = free_port(), [free_port() for _ in range(3)]
    configs = [rules_config(tmp_path, f"gateway{n}", rules, redis_url, backend_port) for n in range(3)]
    async with (
        http_backend(TENANTS, tmp_path / "backend.db", backend_port, "--seed-tenants", "4"),
        serve(configs[0], ports[0]),
        serve(configs[1], ports[1]),
        serve(configs[2], ports[2]),
    ):
        yield ports


async def test_three_replicas_on_redis_share_the_budget_counts(tmp_path: Path, redis_url: str) -> None:
    rules = [
        {"name": "spent", "when": "writes.caller.hour >= 9", "mode": "deny"},
        {"name": "busy", "when": "writes.all.hour >= 3", "mode": "typed"},
    ]
    modes: list[str] = []
    async with three_replicas(tmp_path, rules, redis_url) as ports:
        for number in range(12):
            target = f"tn_bulk{number % 4 + 1:06d}"
            answers = Answers(content={"confirm": True, "confirmTarget": target})
            url = f"http://127.0.0.1:{ports[number % 3]}/mcp"  # round robin over the replicas
            async with Client(url, elicitation_callback=answers) as client:
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
    assert modes == ["form"] * 3 + ["typed"] * 6 + ["denied"] * 3
    assert TENANTS.write_count(tmp_path / "backend.db") == 9


async def test_previews_ahead_on_three_replicas_meet_the_same_budget(tmp_path: Path, redis_url: str) -> None:
    """Previews first, writes after, round robin over three replicas sharing Redis: the budget stops the
    previews at the same count as writing each plan at once, so no more writes happen than it allows."""
    rules = [{"name": "spent", "when": "writes.caller.hour >= 4", "mode": "deny"}]
    plans: list[dict[str, Any]] = []
    refusals: list[str] = []
    async with three_replicas(tmp_path, rules, redis_url) as ports:
        for number in range(9):
            target = f"tn_bulk{number % 4 + 1:06d}"
            async with Client(f"http://127.0.0.1:{ports[number % 3]}/mcp") as client:
                planned = await client.call_tool(TENANTS.preview_tool, {"tenantId": target, "fixture": "empty"})
            if planned.is_error:
                refusals.append(error_code(planned))
            else:
                plans.append({**(planned.structured_content or {}), "target": target})
        for number, plan in enumerate(plans):
            answers = Answers(content={"confirm": True})
            async with Client(
                f"http://127.0.0.1:{ports[(number + 1) % 3]}/mcp", elicitation_callback=answers
            ) as client:
                done = await client.call_tool(
                    TENANTS.write_tool, {"planId": plan["planId"], "idempotencyKey": new_key()}
                )
            assert not done.is_error, done.content
    assert (len(plans), refusals) == (4, ["denied"] * 5)
    assert TENANTS.write_count(tmp_path / "backend.db") == 4


async def test_a_signed_webhook_reaches_its_receiver_with_the_link(tmp_path: Path) -> None:
    received: list[tuple[bytes, dict[str, str]]] = []

    async def hook(request: Request) -> Response:
        received.append((await request.body(), dict(request.headers)))
        return Response(status_code=204)

    hook_port, backend_port, port = free_port(), free_port(), free_port()
    rules = [{"name": "everything", "when": "true", "mode": "url", "notify": "ops"}]
    webhooks = {"ops": {"url": f"http://127.0.0.1:{hook_port}/hook", "secret_env": "GATEWAY_HOOK_SECRET"}}
    config = rules_config(
        tmp_path,
        "gateway",
        rules,
        f"sqlite:{tmp_path}/gateway.db",
        backend_port,
        public_url=f"http://127.0.0.1:{port}",
        webhooks=webhooks,
    )
    env = {**os.environ, "GATEWAY_HOOK_SECRET": SECRET}
    async with (
        serve_asgi(Starlette(routes=[Route("/hook", hook, methods=["POST"])]), hook_port),
        http_backend(TENANTS, tmp_path / "backend.db", backend_port, *TENANTS.seed_demo),
        serve(config, port, env=env),
        Client(f"http://127.0.0.1:{port}/mcp") as client,
    ):
        plan = await preview(client, TENANTS, "tn_search02")
        pending = await client.call_tool(TENANTS.write_tool, {"planId": plan["planId"], "idempotencyKey": new_key()})
        assert error_code(pending) == "approval_pending"
        with anyio.fail_after(20):
            while not received:  # noqa: ASYNC110 - delivery is asynchronous by design
                await anyio.sleep(0.05)
    body, headers = received[0]
    stamp, _, mac = headers["x-gateway-signature"].partition(",v1=")
    stamp = stamp.removeprefix("t=")
    expected = hmac.new(SECRET.encode(), stamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    assert hmac.compare_digest(mac, expected)
    sent = json.loads(body)
    assert (
        sent["approvalId"] == approval_id_for(plan["planId"]) and sent["url"] == error_body(pending)["details"]["url"]
    )
    assert (sent["rule"], sent["target"], sent["summary"]) == (
        "everything",
        "tn_search02",
        {"rowsDeleted": 25, "rowsInserted": 0},
    )
    assert TENANTS.write_count(tmp_path / "backend.db") == 0


async def test_a_webhook_that_is_down_holds_no_call_up(tmp_path: Path) -> None:
    """Nothing listens at the rule's webhook: the call is answered at once and the notifier keeps retrying in the
    background. The gateway and its backend run in this process; the webhook is a real connection refused."""
    rules = [{"name": "everything", "when": "true", "mode": "url", "notify": "ops"}]

    def with_rules(tools: dict[str, Any]) -> None:
        tools[TENANTS.write_tool].update(approval=rules, prompt_timeout_seconds=2)

    db = tmp_path / "backend.db"
    data = config_data(TENANTS, db, *TENANTS.seed_demo, state_dir=tmp_path / "state", tools=with_rules)
    hooks = {"webhooks": {"ops": {"url": f"http://127.0.0.1:{free_port()}/hook"}}}
    data["approvals"] = {**approvals_section("https://127.0.0.1:8443"), **hooks}
    async with running_gateway(parse_config(data), backend_in_process=True) as gw:
        async with connect(gw, "2025-11-25") as client:
            plan = await preview(client, TENANTS, "tn_search02")
            pending = await client.call_tool(
                TENANTS.write_tool, {"planId": plan["planId"], "idempotencyKey": new_key()}
            )
        assert error_code(pending) == "approval_pending" and error_body(pending)["details"]["url"]
        assert gw.notifier is not None and (gw.notifier.delivered, gw.notifier.failed) == (0, 0)  # still retrying


async def test_an_approver_decides_from_the_terminal(tmp_path: Path) -> None:
    backend_port, port = free_port(), free_port()
    rules = [{"name": "everything", "when": "true", "mode": "url"}]
    config = rules_config(
        tmp_path, "gateway", rules, f"sqlite:{tmp_path}/gateway.db", backend_port, public_url=f"http://127.0.0.1:{port}"
    )
    base = f"http://127.0.0.1:{port}"

    async def approvals(*words: str, token: str | None = TOKENS["bob"]) -> tuple[int, str]:
        env = {**os.environ, "GATEWAY_APPROVER_TOKEN": token or ""}
        done = await anyio.run_process(
            [sys.executable, "-m", "gateway", "approvals", *words, "--url", base], env=env, check=False
        )
        return done.returncode, done.stdout.decode() + done.stderr.decode()

    async with (
        http_backend(TENANTS, tmp_path / "backend.db", backend_port, *TENANTS.seed_demo),
        serve(config, port),
        Client(f"{base}/mcp") as client,
    ):
        plan = await preview(client, TENANTS, "tn_billing03")
        args = {"planId": plan["planId"], "idempotencyKey": new_key()}
        assert error_code(await client.call_tool(TENANTS.write_tool, args)) == "approval_pending"
        approval_id = approval_id_for(plan["planId"])
        code, listed = await approvals("list")
        assert code == 0 and approval_id in listed and '"tn_billing03"' in listed
        assert (await approvals("list", token="not-a-token"))[0] == 2
        code, said = await approvals("approve", approval_id, "--unattended")
        assert code == 0 and "approved" in said
        applied = await client.call_tool(TENANTS.write_tool, args)
    assert not applied.is_error, applied.content
    assert TENANTS.write_count(tmp_path / "backend.db") == 1


async def test_the_terminal_says_when_approver_token_attempts_come_too_fast(tmp_path: Path) -> None:
    backend_port, port = free_port(), free_port()
    rules = [{"name": "everything", "when": "true", "mode": "url"}]
    base = f"http://127.0.0.1:{port}"
    config = rules_config(
        tmp_path, "gateway", rules, "memory", backend_port, public_url=base, token_attempts_per_minute=2
    )
    env = {**os.environ, "GATEWAY_APPROVER_TOKEN": TOKENS["bob"]}
    async with http_backend(TENANTS, tmp_path / "backend.db", backend_port, *TENANTS.seed_demo), serve(config, port):
        said = []
        for _ in range(3):
            done = await anyio.run_process(
                [sys.executable, "-m", "gateway", "approvals", "list", "--url", base], env=env, check=False
            )
            said.append((done.returncode, done.stderr.decode()))
    assert [code for code, _ in said] == [0, 0, 2]
    assert "too many approver-token attempts; retry in" in said[2][1]


async def test_only_a_person_at_a_terminal_decides_unless_a_script_says_unattended(tmp_path: Path) -> None:
    backend_port, port = free_port(), free_port()
    rules = [{"name": "everything", "when": "true", "mode": "url"}]
    config = rules_config(
        tmp_path, "gateway", rules, f"sqlite:{tmp_path}/gateway.db", backend_port, public_url=f"http://127.0.0.1:{port}"
    )
    base = f"http://127.0.0.1:{port}"
    env = {**os.environ, "GATEWAY_APPROVER_TOKEN": TOKENS["bob"]}
    command = [sys.executable, "-m", "gateway", "approvals"]

    async def piped(*words: str) -> tuple[int, str]:  # an agent in the approver's shell: no terminal
        done = await anyio.run_process([*command, *words, "--url", base], env=env, check=False)
        return done.returncode, done.stdout.decode() + done.stderr.decode()

    async def typed(answers: list[str], *words: str) -> tuple[int, str]:
        return await anyio.to_thread.run_sync(at_a_terminal, [*command, *words, "--url", base], env, answers)

    async with (
        http_backend(TENANTS, tmp_path / "backend.db", backend_port, *TENANTS.seed_demo),
        serve(config, port),
        Client(f"{base}/mcp") as client,
    ):
        first = await preview(client, TENANTS, "tn_billing03")
        second = await preview(client, TENANTS, "tn_search02")
        keys = {plan["planId"]: {"planId": plan["planId"], "idempotencyKey": new_key()} for plan in (first, second)}
        for args in keys.values():
            assert error_code(await client.call_tool(TENANTS.write_tool, args)) == "approval_pending"
        one, two = (approval_id_for(plan["planId"]) for plan in (first, second))

        code, said = await piped("approve", one)
        assert code == 2 and "stdin is not one" in said
        code, screen = await typed([TOKENS["bob"], "n"], "approve", one)
        assert code == 1 and "not approved" in screen
        assert '"tn_billing03"' in screen and "fixture=" in screen and "question" in screen
        assert error_code(await client.call_tool(TENANTS.write_tool, keys[first["planId"]])) == "approval_pending"
        assert TENANTS.write_count(tmp_path / "backend.db") == 0

        code, screen = await typed([TOKENS["bob"], "y"], "approve", one)
        assert code == 0 and f"{one}: approved" in screen, screen
        assert not (await client.call_tool(TENANTS.write_tool, keys[first["planId"]])).is_error
        code, said = await piped("approve", two, "--unattended")
        assert code == 0 and f"{two}: approved" in said and '"tn_search02"' in said
        assert not (await client.call_tool(TENANTS.write_tool, keys[second["planId"]])).is_error
    assert TENANTS.write_count(tmp_path / "backend.db") == 2


async def test_check_explains_which_rule_a_plan_would_hit(tmp_path: Path) -> None:
    rules = [
        {"name": "huge", "when": "summary.rowsDeleted > 1000", "mode": "url", "approvers": 2},
        {"name": "sizeable", "when": "summary.rowsDeleted > 100", "mode": "typed"},
    ]
    data = config_data(TENANTS, tmp_path / "backend.db", *TENANTS.seed_demo, state_dir=tmp_path / "state")
    data["tools"][TENANTS.write_tool]["approval"] = rules
    data["approvals"] = approvals_section("http://127.0.0.1:1")
    config = write_toml(data, tmp_path / "gateway.toml")

    async def explain(*words: str) -> str:
        command = [sys.executable, "-m", "gateway", "check", "--config", str(config), "--explain", *words]
        done = await anyio.run_process(command, check=False)
        assert done.returncode == 0, done.stdout.decode() + done.stderr.decode()
        return done.stdout.decode()

    load = await explain(TENANTS.write_tool, "tn_load04", "fixture=empty")
    checkout = await explain(TENANTS.write_tool, "tn_checkout01", "fixture=empty")
    small = await explain(TENANTS.write_tool, "tn_search02", "fixture=empty")
    assert "rule huge: holds" in load and "-> mode 'url' by rule huge, approvers 2" in load
    assert "rule huge: does not hold" in checkout and "-> mode 'typed' by rule sizeable" in checkout
    assert "-> no rule holds: the tool's own confirm = 'form'" in small
