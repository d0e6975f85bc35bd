"""The tool-approval extension (SEP-2848 draft, experimental) over the tasks extension, in process: a client that
declares both gets a ``working`` task at once with the structured denial and a sentence for the model, sees the
denial repeated on every ``tasks/get`` while people decide, and the task ends in the state the draft names, with
its disposition in ``_meta`` and in words: approved-executed (one write), denied-not-executed (a Reject, an expired
approval: nothing written), execution-error (the backend refused the sent write), cancelled (before the claim, even
after the approval). A client that declares the extension without tasks, or on the 2025-11-25 wire, keeps today's
answers."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client

from gateway.approvals.lifecycle import State, approval_id_for, state
from gateway.config import parse_config
from gateway.errors import AUTHORIZATION_META, Code, ToolError
from gateway.http.app import build_app
from gateway.mcp import approval as tool_approval
from gateway.mcp import resume
from gateway.mcp.calls import error_result
from gateway.mcp.server import build_server
from gateway.protocol import DISPOSITION_META, MODEL_RESPONSE_META
from tests.support import tasks
from tests.support.approvals import PageUser, approvals_section, url_mode
from tests.support.clients import Clock, error_code, new_key, preview, running_gateway
from tests.support.configs import config_data
from tests.support.profiles import TENANTS, Profile
from tests.unit.test_tasks import PAGE, World

pytestmark = pytest.mark.anyio


async def world_with(profile: Profile, tmp: Path, *backend_args: str) -> AsyncIterator[World]:
    db = tmp / "backend.db"
    data = config_data(
        profile,
        db,
        *profile.seed_demo,
        *backend_args,
        state_dir=tmp / "state",
        tools=url_mode(profile.write_tool, approvers=2, four_eyes=False),
    )
    data["approvals"] = approvals_section(PAGE)
    data["http"] = {"allowed_origins": [PAGE]}
    clock = Clock()
    async with running_gateway(parse_config(data), clock, backend_in_process=True) as gw:
        yield World(gw, db, clock, build_app(gw))


@pytest.fixture
async def world(profile: Profile, tmp_path: Path) -> AsyncIterator[World]:
    async for made in world_with(profile, tmp_path):
        yield made


def agent(world: World, *extensions: Any) -> Client:
    """A 2026-07-28 client declaring the tasks and tool-approval extensions (or the ones given)."""
    chosen = list(extensions) or [tasks.TasksClient(), tasks.ToolApprovalClient()]
    return Client(build_server(world.gw), extensions=chosen)


async def decide(world: World, approval_id: str, verdict: str, *people: str) -> None:
    for who in people:
        user = PageUser(httpx.AsyncClient(transport=httpx.ASGITransport(app=world.app), base_url=PAGE), PAGE)
        async with user.http:
            assert (await user.sign_in(who)).status_code == 303
            assert (await user.decide(approval_id, verdict)).status_code == 303


async def started(client: Client, profile: Profile, target: str | None = None) -> tuple[dict[str, Any], str]:
    """A url-mode write answered with a task: the CreateTaskResult and the approval's id."""
    plan = await preview(client, profile, target)
    created = await tasks.call(client, profile.write_tool, {"planId": plan["planId"], "idempotencyKey": new_key()})
    assert isinstance(created, dict), created
    return created, approval_id_for(plan["planId"])


def last_words(result: dict[str, Any]) -> str:
    return str(result["content"][-1]["text"])


async def test_the_task_is_working_at_once_repeats_its_denial_and_writes_once_after_approval(
    world: World, profile: Profile
) -> None:
    before = profile.write_count(world.db), profile.snapshot(world.db, profile.main)
    async with agent(world) as client:
        created, approval_id = await started(client, profile)
        polls = [await tasks.get(client, created["taskId"], meta=True) for _ in range(2)]
        await resume.resume_due(world.gw)  # nobody decided: nothing runs
        await decide(world, approval_id, "approve", "bob")
        half = await tasks.get(client, created["taskId"], meta=True)
        unwritten = profile.write_count(world.db), profile.snapshot(world.db, profile.main)
        await decide(world, approval_id, "approve", "carol")
        await resume.resume_due(world.gw)
        done = await tasks.get(client, created["taskId"], meta=True)
    url = f"{PAGE}/approvals/{approval_id}"
    assert created["resultType"] == "task" and created["status"] == "working"
    assert url in created["statusMessage"] and "2 more approval(s) of 2" in created["statusMessage"]
    denial = created["_meta"][AUTHORIZATION_META]
    assert (denial["remediation"], denial["authorizationContextId"]) == ("available", approval_id)
    assert [hint["type"] for hint in denial["remediationHints"]] == ["task", "url", "mcp-safety-gateway/approval"]
    assert "has not run" in created["_meta"][MODEL_RESPONSE_META]
    for poll in [*polls, half]:
        assert poll["status"] == "working" and "inputRequests" not in poll
        assert poll["_meta"][AUTHORIZATION_META]["remediation"] == "available"  # repeated on every non-terminal get
    assert half["_meta"][AUTHORIZATION_META]["remediationHints"][2]["approvedSoFar"] == 1
    assert unwritten == before
    assert done["status"] == "completed" and AUTHORIZATION_META not in done["result"].get("_meta", {})
    assert done["result"]["_meta"][DISPOSITION_META] == "approved-executed"
    assert done["result"]["structuredContent"]["replayed"] is False and "The tool ran" in last_words(done["result"])
    assert profile.write_count(world.db) == before[0] + 1


async def test_a_reject_and_an_expired_approval_end_denied_not_executed_and_write_nothing(
    world: World, profile: Profile
) -> None:
    before = profile.write_count(world.db), profile.snapshot(world.db, profile.main)
    async with agent(world) as client:
        rejected, rejected_id = await started(client, profile)
        expiring, _ = await started(client, profile, profile.other)
        await decide(world, rejected_id, "reject", "bob")
        world.clock.offset += 601  # past the second plan, and its approval
        await resume.resume_due(world.gw)
        ends = [await tasks.get(client, task["taskId"]) for task in (rejected, expiring)]
    for end in ends:
        assert end["status"] == "completed" and end["result"]["isError"] is True
        assert end["result"]["_meta"][DISPOSITION_META] == "denied-not-executed"
        assert end["result"]["_meta"][AUTHORIZATION_META]["remediation"] == "unavailable"
        assert "The tool did not run" in last_words(end["result"])
        assert "structuredContent" not in end["result"]
    assert (profile.write_count(world.db), profile.snapshot(world.db, profile.main)) == before


async def test_a_cancel_after_the_approval_but_before_the_claim_ends_the_task_and_nothing_is_written(
    world: World, profile: Profile
) -> None:
    before = profile.write_count(world.db), profile.snapshot(world.db, profile.main)
    async with agent(world) as client:
        created, approval_id = await started(client, profile)
        await decide(world, approval_id, "approve", "bob", "carol")
        await tasks.cancel(client, created["taskId"])  # approved, not yet resumed: no claim yet
        await resume.resume_due(world.gw)
        ended = await tasks.get(client, created["taskId"], meta=True)
    approval = await world.gw.store.get_approval(approval_id)
    assert ended["status"] == "cancelled" and "result" not in ended
    assert DISPOSITION_META not in str(ended)
    assert approval is not None and state(approval, world.clock()) is State.CANCELLED
    assert (profile.write_count(world.db), profile.snapshot(world.db, profile.main)) == before


async def test_a_sent_write_the_backend_refuses_ends_execution_error(profile: Profile, tmp_path: Path) -> None:
    async for world in world_with(profile, tmp_path, "--fault", "fail-before-write"):
        before = profile.write_count(world.db)
        async with agent(world) as client:
            created, approval_id = await started(client, profile)
            await decide(world, approval_id, "approve", "bob", "carol")
            await resume.resume_due(world.gw)
            ended = await tasks.get(client, created["taskId"])
        assert ended["status"] == "completed" and ended["result"]["isError"] is True
        assert ended["result"]["_meta"][DISPOSITION_META] == "execution-error"
        assert AUTHORIZATION_META not in ended["result"]["_meta"]  # an execution error is no denial
        assert "ran after approval" in last_words(ended["result"])
        assert profile.write_count(world.db) == before  # this fault refuses before the backend writes


async def test_a_client_without_both_extensions_keeps_todays_answers_in_both_eras(
    world: World, profile: Profile
) -> None:
    before = profile.write_count(world.db)
    answers = []
    for era, extensions in (
        ("2026-07-28", [tasks.ToolApprovalClient()]),  # tool-approval without tasks: no task at all
        ("2025-11-25", [tasks.TasksClient(), tasks.ToolApprovalClient()]),  # no tasks on this wire
    ):
        mode = "legacy" if era == "2025-11-25" else "auto"
        async with Client(build_server(world.gw), extensions=extensions, mode=mode) as client:
            plan = await preview(client, profile)
            answers.append(
                await client.call_tool(profile.write_tool, {"planId": plan["planId"], "idempotencyKey": new_key()})
            )
    async with agent(world, tasks.TasksClient()) as client:  # tasks alone: the tasks extension's own shape
        created, _ = await started(client, profile)
        polled = await tasks.get(client, created["taskId"])
    assert [error_code(answer) for answer in answers] == ["approval_pending", "approval_pending"]
    assert created["status"] == "input_required" and AUTHORIZATION_META not in created.get("_meta", {})
    assert polled["status"] == "input_required" and "inputRequests" in polled
    assert profile.write_count(world.db) == before


def test_a_call_that_failed_before_its_claim_fails_the_task_and_one_that_may_have_run_is_outcome_unknown() -> None:
    lost = ToolError(Code.OUTCOME_UNKNOWN, "Sent, and no answer came.", details={"current": None})
    status, result, error = tool_approval.ended(error_result(lost), "outcome_unknown")
    assert (status, error) == ("completed", None) and result is not None
    assert result["_meta"] == {DISPOSITION_META: "outcome-unknown"}  # an unknown outcome is no denial
    assert "may have run" in last_words(result)
    unsent = ToolError(Code.INTERNAL_ERROR, "The gateway failed before sending the write; nothing was changed.")
    status, result, error = tool_approval.ended(error_result(unsent), "internal_error")
    assert (status, result) == ("failed", None)
    assert error == {"code": -32603, "message": "The gateway failed before sending the write; nothing was changed."}


async def test_a_rule_that_denies_once_people_approved_ends_the_task_denied_not_executed(tmp_path: Path) -> None:
    """The rules are decided again under the target's lock before the claim: a ``recheck`` rule that holds now
    (the tenant was renamed out of band while people decided) denies, and nothing is written."""
    db = tmp_path / "backend.db"

    def rules(tools: dict[str, Any]) -> None:
        url_mode(TENANTS.write_tool)(tools)
        renamed = {"name": "renamed", "when": 'target.name == "gone"', "mode": "deny", "recheck": True}
        tools[TENANTS.write_tool]["approval"] = [renamed]

    data = config_data(TENANTS, db, *TENANTS.seed_demo, state_dir=tmp_path / "state", tools=rules)
    data["approvals"] = approvals_section(PAGE)
    data["http"] = {"allowed_origins": [PAGE]}
    clock = Clock()
    async with running_gateway(parse_config(data), clock, backend_in_process=True) as gw:
        world = World(gw, db, clock, build_app(gw))
        async with agent(world) as client:
            created, approval_id = await started(client, TENANTS)
            with sqlite3.connect(db) as conn:
                conn.execute("UPDATE tenants SET name = 'gone' WHERE id = ?", (TENANTS.main,))
            before = TENANTS.write_count(db), TENANTS.snapshot(db, TENANTS.main)
            await decide(world, approval_id, "approve", "bob")
            await resume.resume_due(gw)
            ended = await tasks.get(client, created["taskId"])
    assert json.loads(ended["result"]["content"][0]["text"])["code"] == "denied"
    assert ended["result"]["_meta"][DISPOSITION_META] == "denied-not-executed"
    assert (TENANTS.write_count(db), TENANTS.snapshot(db, TENANTS.main)) == before
