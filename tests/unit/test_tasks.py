"""A url-mode write from a client that declared the tasks extension is an MCP task: answered at once, followed with
``tasks/get``, written once after a person approves (the gateway resumes the call itself), cancellable before the
decision, bound to its key; a client without the extension keeps today's answers."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from gateway.approvals.lifecycle import approval_id_for
from gateway.audit import display
from gateway.config import parse_config
from gateway.http.app import build_app
from gateway.mcp import resume as gateway_tasks
from gateway.mcp.server import build_server
from gateway.runtime import Gateway
from tests.support import tasks
from tests.support.approvals import PageUser, approvals_section, url_mode
from tests.support.clients import (
    Clock,
    connect,
    error_body,
    error_code,
    new_key,
    preview,
    running_gateway,
    without_digest,
)
from tests.support.configs import config_data
from tests.support.profiles import Profile

pytestmark = pytest.mark.anyio
PAGE = "https://127.0.0.1:8443"


@dataclass
class World:
    gw: Gateway
    db: Path
    clock: Clock
    app: Any


@pytest.fixture
async def world(profile: Profile, tmp_path: Path) -> AsyncIterator[World]:
    async for made in world_of(profile, tmp_path):
        yield made


async def world_of(profile: Profile, tmp_path: Path) -> AsyncIterator[World]:
    """A gateway whose write waits for people on its page, a caller holding at most two live tasks."""
    db = tmp_path / "backend.db"
    data = config_data(
        profile, db, *profile.seed_demo, state_dir=tmp_path / "state", tools=url_mode(profile.write_tool)
    )
    data["approvals"] = {**approvals_section(PAGE), "max_tasks_per_caller": 2}
    data["http"] = {"allowed_origins": [PAGE]}
    clock = Clock()
    async with running_gateway(parse_config(data), clock, backend_in_process=True) as gw:
        gw.listen_read_seconds = 0.05  # a stream hears a change this soon, instead of a second of real time
        yield World(gw, db, clock, build_app(gw))


def agent(world: World) -> Client:
    """A 2026-07-28 client that declares the tasks extension (and no elicitation)."""
    return Client(build_server(world.gw), extensions=[tasks.TasksClient()])


async def decide(world: World, approval_id: str, verdict: str = "approve", who: str = "bob") -> None:
    user = PageUser(httpx.AsyncClient(transport=httpx.ASGITransport(app=world.app), base_url=PAGE), PAGE)
    async with user.http:
        assert (await user.sign_in(who)).status_code == 303
        assert (await user.decide(approval_id, verdict)).status_code == 303


async def test_a_url_mode_write_is_a_task_written_once_after_a_person_approves(world: World, profile: Profile) -> None:
    before = profile.write_count(world.db), profile.snapshot(world.db, profile.main)
    async with agent(world) as client:
        plan = await preview(client, profile)
        args = {"planId": plan["planId"], "idempotencyKey": new_key()}
        created = await tasks.call(client, profile.write_tool, args)
        assert isinstance(created, dict) and created["resultType"] == "task"
        assert set(created) >= {"taskId", "status", "createdAt", "lastUpdatedAt", "ttlMs", "pollIntervalMs"}
        assert "result" not in created and "requestState" not in created
        waiting = await tasks.get(client, created["taskId"])
        stored_task = await world.gw.store.get_task(created["taskId"])
        stored_approval = await world.gw.store.get_approval(approval_id_for(plan["planId"]))
        assert stored_task is not None and stored_approval is not None  # the task carries its approval's digest
        assert stored_task.digest is not None and stored_task.digest == stored_approval.digest
        again = await tasks.call(client, profile.write_tool, args)  # the same key while its task lives
        await gateway_tasks.resume_due(world.gw)  # nobody decided: nothing to resume
        assert (profile.write_count(world.db), profile.snapshot(world.db, profile.main)) == before
        await decide(world, approval_id_for(plan["planId"]))
        assert (await tasks.get(client, created["taskId"]))["status"] == "working"  # decided, not yet written
        await gateway_tasks.resume_due(world.gw)
        done = await tasks.get(client, created["taskId"])
        replay = await client.call_tool(profile.write_tool, args)
    assert waiting["status"] == "input_required"
    link = waiting["inputRequests"]["approval"]["params"]
    assert (link["mode"], link["url"]) == ("url", f"{PAGE}/approvals/{approval_id_for(plan['planId'])}")
    assert isinstance(again, dict) and again["taskId"] == created["taskId"]
    assert done["status"] == "completed" and done["result"]["structuredContent"]["replayed"] is False
    assert replay.structured_content == {**done["result"]["structuredContent"], "replayed": True}
    assert profile.write_count(world.db) == before[0] + 1
    entries = [
        (e.outcome, without_digest(e.extra))
        async for e in world.gw.store.audit_entries()
        if e.idempotency_key == args["idempotencyKey"]
    ]
    assert entries == [
        ("applied", {"mode": "url", "approvers": [{"issuer": "static", "subject": "bob", "display": "Bob"}]}),
        (
            "returned",
            {
                "mode": "url",
                "approvers": [{"issuer": "static", "subject": "bob", "display": "Bob"}],
                "answered": "result",
            },
        ),
        ("replayed", {}),
    ]


async def test_a_task_cancelled_before_the_decision_ends_its_plan_and_writes_nothing(
    world: World, profile: Profile
) -> None:
    before = profile.write_count(world.db), profile.snapshot(world.db, profile.main)
    async with agent(world) as client:
        plan = await preview(client, profile)
        args = {"planId": plan["planId"], "idempotencyKey": new_key()}
        created = await tasks.call(client, profile.write_tool, args)
        assert isinstance(created, dict)
        ack = await tasks.cancel(client, created["taskId"])
        await decide(world, approval_id_for(plan["planId"]))  # too late: the plan is gone
        await gateway_tasks.resume_due(world.gw)
        cancelled = await tasks.get(client, created["taskId"])
        retried = await client.call_tool(profile.write_tool, {**args, "idempotencyKey": new_key()})
    assert ack == {"resultType": "complete"}
    assert cancelled["status"] == "cancelled" and "result" not in cancelled
    assert error_code(retried) == "plan_not_found"
    assert (profile.write_count(world.db), profile.snapshot(world.db, profile.main)) == before
    outcomes = [e.outcome async for e in world.gw.store.audit_entries() if e.idempotency_key == args["idempotencyKey"]]
    assert outcomes == ["cancelled"]


async def test_a_cancelled_task_is_listed_under_its_target(world: World, profile: Profile) -> None:
    """``audit list --tenant ID`` shows the cancel of a write to that target, as it shows the write's other entries."""
    async with agent(world) as client:
        plan = await preview(client, profile)
        args = {"planId": plan["planId"], "idempotencyKey": new_key()}
        created = await tasks.call(client, profile.write_tool, args)
        assert isinstance(created, dict)
        await tasks.cancel(client, created["taskId"])
    entries = [entry async for entry in world.gw.store.audit_entries()]
    listed = [entry for entry in entries if display.matches(entry, target=profile.main, caller=None, since=None)]
    assert [(entry.outcome, entry.idempotency_key) for entry in listed] == [
        ("proposed", None),  # the approval was asked for, then the task cancelled
        ("cancelled", args["idempotencyKey"]),
    ]
    assert "cancelled" in display.table(listed)


async def test_an_answered_link_is_not_asked_again_and_a_declined_one_ends_the_task(
    world: World, profile: Profile
) -> None:
    """A client that answered the approval link (tasks/update, accept) sees its task working while people decide,
    never the answered request again (the extension asks each input key once); a declined link ends the task."""
    before = profile.write_count(world.db)
    async with agent(world) as client:
        plan = await preview(client, profile)
        opened = await tasks.call(client, profile.write_tool, {"planId": plan["planId"], "idempotencyKey": new_key()})
        other = await preview(client, profile, profile.other)
        declined = await tasks.call(
            client, profile.write_tool, {"planId": other["planId"], "idempotencyKey": new_key()}
        )
        assert isinstance(opened, dict) and isinstance(declined, dict)
        acks = [
            await tasks.update(client, opened["taskId"], {"approval": {"action": "accept"}}),
            await tasks.update(client, declined["taskId"], {"approval": {"action": "decline"}}),
            await tasks.update(client, opened["taskId"], {"approval": {"action": "accept"}}),  # answered: ignored
        ]
        waiting = await tasks.get(client, opened["taskId"])
        await gateway_tasks.resume_due(world.gw)  # nobody decided: nothing to resume
        still = await tasks.get(client, opened["taskId"])
        ended = await tasks.get(client, declined["taskId"])
        written_before_the_decision = profile.write_count(world.db)
        await decide(world, approval_id_for(plan["planId"]))
        await gateway_tasks.resume_due(world.gw)
        done = await tasks.get(client, opened["taskId"])
    assert acks == [{"resultType": "complete"}] * 3
    assert waiting["status"] == still["status"] == "working" and "inputRequests" not in waiting
    assert f"/approvals/{approval_id_for(plan['planId'])}" in waiting["statusMessage"]
    assert ended["status"] == "cancelled"
    assert written_before_the_decision == before
    assert done["status"] == "completed" and not done["result"].get("isError")
    assert profile.write_count(world.db) == before + 1


async def test_a_cancel_after_the_approval_cannot_undo_the_write_and_says_so(world: World, profile: Profile) -> None:
    before = profile.write_count(world.db)
    async with agent(world) as client:
        plan = await preview(client, profile)
        created = await tasks.call(client, profile.write_tool, {"planId": plan["planId"], "idempotencyKey": new_key()})
        assert isinstance(created, dict)
        await decide(world, approval_id_for(plan["planId"]))
        await tasks.cancel(client, created["taskId"])
        refused = await tasks.get(client, created["taskId"])
        await gateway_tasks.resume_due(world.gw)
        done = await tasks.get(client, created["taskId"])
    assert refused["status"] == "working" and "cannot be undone" in refused["statusMessage"]
    assert done["status"] == "completed" and not done["result"].get("isError")
    assert profile.write_count(world.db) == before + 1


async def test_a_rejected_or_expired_task_completes_as_a_refusal_and_writes_nothing(
    world: World, profile: Profile
) -> None:
    before = profile.write_count(world.db), profile.snapshot(world.db, profile.main)
    async with agent(world) as client:
        rejected_plan = await preview(client, profile)
        args = {"planId": rejected_plan["planId"], "idempotencyKey": new_key()}
        rejected = await tasks.call(client, profile.write_tool, args)
        expiring_plan = await preview(client, profile, variant=1)
        expiring = await tasks.call(
            client, profile.write_tool, {"planId": expiring_plan["planId"], "idempotencyKey": new_key()}
        )
        assert isinstance(rejected, dict) and isinstance(expiring, dict)
        await decide(world, approval_id_for(rejected_plan["planId"]), "reject")
        world.clock.offset += 601  # past the second plan (and its approval)
        await gateway_tasks.resume_due(world.gw)
        ends = [await tasks.get(client, task["taskId"]) for task in (rejected, expiring)]
    assert [end["status"] for end in ends] == ["completed", "completed"]
    assert [end["result"]["isError"] for end in ends] == [True, True]
    assert (profile.write_count(world.db), profile.snapshot(world.db, profile.main)) == before


async def test_a_caller_past_its_live_tasks_is_refused_and_a_client_without_the_extension_keeps_todays_answers(
    world: World, profile: Profile
) -> None:
    before = profile.write_count(world.db)
    async with agent(world) as client:
        made = []
        for target in (profile.main, profile.other, profile.spare):
            plan = await preview(client, profile, target)
            made.append(
                await tasks.call(client, profile.write_tool, {"planId": plan["planId"], "idempotencyKey": new_key()})
            )
        task_id = made[0]["taskId"] if isinstance(made[0], dict) else ""
    assert [isinstance(answer, dict) for answer in made] == [True, True, False]
    assert isinstance(made[2], types.CallToolResult) and error_code(made[2]) == "too_many_tasks"
    async with connect(world.gw, "2026-07-28") as plain:
        plan = await preview(plain, profile)
        pending = await plain.call_tool(profile.write_tool, {"planId": plan["planId"], "idempotencyKey": new_key()})
        with pytest.raises(MCPError) as raised:
            await tasks.get(plain, task_id)
    assert error_code(pending) == "approval_pending" and "url" in error_body(pending)["details"]
    assert raised.value.code == types.MISSING_REQUIRED_CLIENT_CAPABILITY
    assert profile.write_count(world.db) == before


async def test_an_unknown_task_is_not_found(world: World) -> None:
    async with agent(world) as client:
        with pytest.raises(MCPError) as raised:
            await tasks.get(client, "tk_nothing")
    assert raised.value.code == types.INVALID_PARAMS


async def test_a_listen_stream_tells_its_caller_each_state_of_its_own_tasks_until_they_end(
    world: World, profile: Profile
) -> None:
    """``subscriptions/listen`` with ``taskIds``: the acknowledgement honours only the caller's own live tasks (an
    unknown id and another caller's are left out alike), each state is sent once as ``tasks/get`` shows it, the
    last with the result, and the stream then ends by itself."""
    heard = tasks.Heard()
    before = profile.write_count(world.db)
    async with Client(build_server(world.gw), extensions=[tasks.TasksClient(heard)], message_handler=heard) as client:
        plan = await preview(client, profile)
        created = await tasks.call(client, profile.write_tool, {"planId": plan["planId"], "idempotencyKey": new_key()})
        assert isinstance(created, dict)
        mine = await world.gw.store.get_task(created["taskId"])
        assert mine is not None
        await world.gw.store.create_task(replace(mine, task_id="tk_someone_elses", caller="someone-else"))
        async with tasks.listening(client, [created["taskId"], "tk_someone_elses", "tk_nothing"]) as stream:
            await heard.until(lambda h: bool(h.tasks))
            await decide(world, approval_id_for(plan["planId"]))
            await gateway_tasks.resume_due(world.gw)
            with anyio.fail_after(10):
                await stream.ended.wait()
        polled = await tasks.get(client, created["taskId"])
    assert heard.acks == [{"taskIds": [created["taskId"]]}]
    assert {note["taskId"] for note in heard.tasks} == {created["taskId"]}
    statuses = [note["status"] for note in heard.tasks]
    assert statuses[0] == "input_required" and statuses[-1] == "completed"
    assert len(statuses) == len(set(map(str, heard.tasks)))  # no state sent twice
    assert heard.tasks[0]["inputRequests"]["approval"]["params"]["mode"] == "url"
    assert {key: polled[key] for key in ("status", "result")} == {
        key: heard.tasks[-1][key] for key in ("status", "result")
    }
    assert stream.error is None and stream.result is not None
    assert profile.write_count(world.db) == before + 1


async def test_listening_for_tasks_needs_the_extension_and_a_caller_holds_few_streams(world: World) -> None:
    async with connect(world.gw, "2026-07-28") as plain, tasks.listening(plain, ["tk_nothing"]) as refused:
        with anyio.fail_after(10):
            await refused.ended.wait()
    assert refused.error is not None and refused.error.code == types.MISSING_REQUIRED_CLIENT_CAPABILITY
    async with agent(world) as client, tasks.listening(client, "tk_nothing") as not_a_list:
        with anyio.fail_after(10):
            await not_a_list.ended.wait()
    assert not_a_list.error is not None and not_a_list.error.code == types.INVALID_PARAMS
    heard = tasks.Heard()
    async with Client(build_server(world.gw), message_handler=heard) as client, AsyncExitStack() as streams:
        held = [await streams.enter_async_context(tasks.listening(client, tools=True)) for _ in range(5)]
        await heard.until(lambda h: len(h.acks) == 4)
        with anyio.fail_after(10):
            await held[-1].ended.wait()
        assert not any(stream.ended.is_set() for stream in held[:-1])  # tools-only streams stay open
    assert heard.acks == [{"toolsListChanged": True}] * 4
    assert held[-1].error is not None and held[-1].error.code == types.INVALID_REQUEST
    assert "4 listen streams" in held[-1].error.error.message
