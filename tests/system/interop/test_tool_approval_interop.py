"""Interop: the tool-approval extension (the SEP-2848 draft, experimental) with real clients and a real browser.

A served gateway (``python -m gateway serve``, the demo backend as its child, real SQLite files) puts its write
behind the approval page. Two tasks clients declare ``io.modelcontextprotocol/tool-approval`` beside the tasks
extension: the ``@modelcontextprotocol/ext-tasks`` session (driver.mjs ``tasks2ta``) and the fastmcp client
(fastmcp_driver.py ``--tool-approval``). Each is answered with a ``working`` task carrying the structured denial
(SEP-2643) and a sentence for the model, follows it while Chromium approves, rejects or finds it cancelled on the
page, and gets the draft's end: ``completed`` with ``approved-executed`` and exactly one write, ``completed`` isError
with ``denied-not-executed`` and nothing written, or ``cancelled`` and nothing written (the page then says
cancelled and offers nothing to press). What each client sent and what the gateway answered is read from the wire
the drivers record, so the draft's shape is checked as the clients received it; the backend's database is read
after every step.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.clients import applied_body, new_key
from tests.support.profiles import TENANTS
from tests.system.interop.test_interop import (
    TASKS,
    TOOL_APPROVAL,
    Served,
    approve_on_the_page,
    check_era,
    driver,
    needs_fastmcp,
    on_the_page,
    outcome,
    serve_gateway,
    success,
    tool_calls,
)

pytestmark = pytest.mark.anyio

AUTHORIZATION = "io.modelcontextprotocol/authorization"
DISPOSITION = "io.modelcontextprotocol/tool-approval-disposition"
IMMEDIATE = "io.modelcontextprotocol/model-immediate-response"
TARGETS = {"tasks2ta": "tn_bulk000010", "fastmcpta": "tn_bulk000011"}
"""Each client's own tenant, so the tests of one module-wide gateway never meet."""


@pytest.fixture(params=list(TARGETS))
def ta_client(request: pytest.FixtureRequest) -> str:
    """Which client declares the tool-approval extension: ext-tasks (TypeScript) or fastmcp (Python)."""
    return needs_fastmcp(str(request.param))


@pytest.fixture(scope="module")
async def served_by_url(node_tools: None, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Served]:
    """A gateway whose reset_tenant waits for a person on its own approval page (confirm = "url")."""
    async with serve_gateway(tmp_path_factory.mktemp("interop-tool-approval"), by_url=True) as gw:
        yield gw


def answers(*replies: dict[str, Any], method: str) -> list[dict[str, Any]]:
    """What the gateway answered to each ``method`` request the client sent while serving the replies."""
    return [
        entry["answer"]
        for reply in replies
        for entry in reply["wire"]
        if "answer" in entry and any(message.get("method") == method for message in entry["messages"])
    ]


def link_of(created: dict[str, Any]) -> str:
    """The approval page's address, from the task's structured denial (its url hint)."""
    [url] = [hint["url"] for hint in created["_meta"][AUTHORIZATION]["remediationHints"] if hint["type"] == "url"]
    return str(url)


async def started(client: Any, target: str) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Preview ``target`` and call the write: the plan, the taskCall reply, and the CreateTaskResult as sent."""
    previewed = await client.send("taskCall", name=TENANTS.preview_tool, arguments=TENANTS.preview_args(target))
    plan = success({"result": outcome(previewed)["result"]})
    args = {"planId": plan["planId"], "idempotencyKey": new_key()}
    reply = await client.send("taskCall", name=TENANTS.write_tool, arguments=args)
    assert reply["kind"] == "task", reply
    [call] = tool_calls(reply)
    assert set(call.get("extensions", [])) >= {TASKS, TOOL_APPROVAL}, call  # declared on the call itself
    [created] = answers(reply, method="tools/call")
    return plan, reply, created


async def reject_on_the_page(chromium: Any, url: str, person: str) -> None:
    """A person opens the link, signs in, presses Reject and confirms it."""
    async with on_the_page(chromium, url, person) as page:
        await page.click("button.reject")
        await page.wait_for_load_state()
        await page.click("button.confirm")
        await page.wait_for_load_state()
        assert await page.inner_text("h1") == "Rejected"


async def page_says(chromium: Any, url: str, person: str) -> tuple[str, bool]:
    """What the approval page shows a signed-in person: its heading, and whether it offers Approve."""
    async with on_the_page(chromium, url, person) as page:
        return await page.inner_text("h1"), await page.locator("button.approve").count() > 0


def seen_statuses(settled: dict[str, Any]) -> list[str]:
    return [status for n, status in enumerate(settled["statuses"]) if settled["statuses"][n - 1 : n] != [status]]


async def test_a_tool_approval_client_gets_a_working_task_and_exactly_one_write_after_approval(
    served_by_url: Served, chromium: Any, ta_client: str, tmp_path: Path
) -> None:
    gw, target = served_by_url, TARGETS[ta_client]
    writes, before = gw.writes(), gw.tenant(target)
    async with driver(ta_client, gw, tmp_path / "client.stderr") as (client, ready):
        info = await client.send("info")
        check_era(ta_client, ready, info)
        assert info["serverCapabilities"]["extensions"] == {TASKS: {}, TOOL_APPROVAL: {}}

        plan, reply, created = await started(client, target)
        # The draft's CreateTaskResult: working at once, the structured denial, a sentence for the model.
        assert (created["resultType"], created["status"]) == ("task", "working")
        assert gw.approval_page(plan["planId"]) in created["statusMessage"]
        denial = created["_meta"][AUTHORIZATION]
        assert denial["remediation"] == "available"
        assert [hint["type"] for hint in denial["remediationHints"]] == ["task", "url", "mcp-safety-gateway/approval"]
        assert "has not run" in created["_meta"][IMMEDIATE]
        assert link_of(created) == gw.approval_page(plan["planId"])
        assert (gw.writes(), gw.tenant(target)) == (writes, before)

        await approve_on_the_page(chromium, link_of(created), "bob")
        settled = await client.send("taskSettle", taskId=reply["taskId"])
        assert outcome(settled)["status"] == "completed", settled
        assert success({"result": outcome(settled)["result"]}) == applied_body(plan, before[0] + 1)
        assert seen_statuses(settled)[-1] == "completed" and "input_required" not in settled["statuses"]

    polled = answers(reply, settled, method="tasks/get")
    waiting = [task for task in polled if task["status"] != "completed"]
    assert waiting, "the client followed its task with tasks/get while it waited"
    for task in waiting:  # every tasks/get while the task was not terminal repeated the denial
        assert task["status"] == "working" and task["_meta"][AUTHORIZATION]["remediation"] == "available", task
    last = polled[-1]
    assert last["status"] == "completed" and last["result"]["_meta"][DISPOSITION] == "approved-executed"
    assert AUTHORIZATION not in last["result"]["_meta"]
    assert last["result"]["content"][-1]["text"].startswith("The tool ran")
    assert gw.writes() == writes + 1
    assert gw.tenant(target) == (before[0] + 1, 0)


async def test_a_tool_approval_client_whose_write_is_rejected_gets_denied_not_executed(
    served_by_url: Served, chromium: Any, ta_client: str, tmp_path: Path
) -> None:
    gw, target = served_by_url, "tn_bulk000012" if ta_client == "tasks2ta" else "tn_bulk000013"
    writes, before = gw.writes(), gw.tenant(target)
    async with driver(ta_client, gw, tmp_path / "client.stderr") as (client, _):
        _, reply, created = await started(client, target)
        await reject_on_the_page(chromium, link_of(created), "carol")
        settled = await client.send("taskSettle", taskId=reply["taskId"])
    ended = outcome(settled)
    assert ended["status"] == "completed", settled
    assert ended["result"]["isError"] is True and "structuredContent" not in ended["result"]
    last = answers(settled, method="tasks/get")[-1]
    assert last["result"]["_meta"][DISPOSITION] == "denied-not-executed"
    assert last["result"]["_meta"][AUTHORIZATION]["remediation"] == "unavailable"
    assert last["result"]["content"][-1]["text"].startswith("The tool did not run")
    assert (gw.writes(), gw.tenant(target)) == (writes, before)


async def test_a_tool_approval_client_cancels_and_the_page_says_cancelled(
    served_by_url: Served, chromium: Any, ta_client: str, tmp_path: Path
) -> None:
    gw, target = served_by_url, "tn_bulk000014" if ta_client == "tasks2ta" else "tn_bulk000015"
    writes, before = gw.writes(), gw.tenant(target)
    async with driver(ta_client, gw, tmp_path / "client.stderr") as (client, _):
        _, reply, created = await started(client, target)
        cancelled = await client.send("taskCancel", taskId=reply["taskId"])
        assert cancelled.get("cancelled") is True, cancelled
        settled = await client.send("taskSettle", taskId=reply["taskId"])
    heading, offers_approve = await page_says(chromium, link_of(created), "bob")
    assert outcome(settled)["status"] == "cancelled", settled
    assert heading.startswith("Cancelled") and not offers_approve
    assert (gw.writes(), gw.tenant(target)) == (writes, before)
