"""Over real HTTP, a 2025-11-25 session gets one JSON body for every request except a call to a write tool,
which gets the SSE stream its confirmation prompt travels on (gateway/http_streams.py).

These tests also guard the two private mcp 2.3 hooks that module builds on: if an SDK release changes them,
the answer modes recorded here change and the tests say so."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from gateway.http_streams import stream_unless_read_only
from tests.conftest import Answers, applied_body, free_port, new_key, preview, serve, write_config
from tests.profiles import Profile

pytestmark = pytest.mark.anyio

JSON, SSE = "application/json", "text/event-stream"


class AnswerModes:
    """Records, per JSON-RPC request the client POSTs, the content type of the answer."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    async def __call__(self, response: httpx2.Response) -> None:
        request = response.request
        if request.method != "POST":
            return
        message = json.loads(request.content)
        if "id" not in message or "method" not in message:
            return  # notifications and the client's own answers (to a prompt) get 202 and no body
        label = message["method"]
        if label == "tools/call":
            label = message["params"]["name"]
        self.seen.append((label, response.headers.get("content-type", "").split(";")[0]))


@pytest.mark.filterwarnings("ignore:ping is removed")  # a 2025 session: ping is still part of that era
async def test_only_a_write_gets_a_stream_and_its_prompt_still_arrives(tmp_path: Path, profile: Profile) -> None:
    config, port = write_config(profile, tmp_path), free_port()
    db = tmp_path / "backend.db"
    modes, answers = AnswerModes(), Answers()
    async with (
        serve(config, port),
        httpx2.AsyncClient(event_hooks={"response": [modes]}) as http,
        Client(
            streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http),
            mode="legacy",
            elicitation_callback=answers,
        ) as client,
    ):
        await client.list_tools()
        listed = await client.call_tool(profile.list_tool, {})
        version = profile.version(db, profile.main)
        plan = await preview(client, profile)
        args = {"planId": plan["planId"], "idempotencyKey": new_key()}
        first = await client.call_tool(profile.write_tool, args)
        await client.send_ping()
    assert not listed.is_error
    assert first.structured_content == applied_body(plan, version + 1)
    assert len(answers.prompts) == 1
    assert profile.write_count(db) == 1
    assert modes.seen == [
        ("initialize", JSON),
        ("tools/list", JSON),
        (profile.list_tool, JSON),
        (profile.preview_tool, JSON),
        (profile.write_tool, SSE),
        ("ping", JSON),
    ]


async def test_a_refused_read_is_still_one_json_body(tmp_path: Path, profile: Profile) -> None:
    """A read the gateway refuses (bad arguments) answers with its error in a JSON body, and nothing is written."""
    config, port = write_config(profile, tmp_path), free_port()
    db = tmp_path / "backend.db"
    modes = AnswerModes()
    async with (
        serve(config, port),
        httpx2.AsyncClient(event_hooks={"response": [modes]}) as http,
        Client(streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http), mode="legacy") as client,
    ):
        refused = await client.call_tool(profile.preview_tool, {"no such argument": 1})
    assert refused.is_error
    assert (profile.preview_tool, JSON) in modes.seen
    assert profile.write_count(db) == 0


@pytest.mark.parametrize(
    ("message", "needs_stream"),
    [
        ({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}, False),
        ({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, False),
        ({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "list_tenants"}}, False),
        ({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "reset_tenant"}}, True),
        ({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "no_such_tool"}}, True),
        ({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": []}, True),
        ({"jsonrpc": "2.0", "id": 1, "method": "tools/call"}, True),
        ([{"jsonrpc": "2.0", "id": 1, "method": "ping"}], True),
        (None, True),
    ],
)
def test_which_requests_may_need_a_stream(message: Any, needs_stream: bool) -> None:
    assert stream_unless_read_only(["list_tenants", "preview_tenant_reset"])(message) is needs_stream
