"""Over real HTTP, a 2025-11-25 session gets one JSON body for every request except a call to a write tool,
which gets the SSE stream its confirmation prompt travels on (gateway/http/answer_modes.py).

These tests also guard the two private mcp 2.3 hooks that module builds on: if an SDK release changes them,
the answer modes recorded here change and the tests say so."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import JSONRPCRequest, JSONRPCResponse

from tests.support.clients import Answers, applied_body, new_key, preview
from tests.support.configs import write_config
from tests.support.processes import free_port, serve
from tests.support.profiles import Profile

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


PROTOCOL = "2025-11-25"
ACCEPT_BOTH = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


async def events(response: httpx.Response) -> AsyncIterator[dict[str, str]]:
    """The SSE events of a streamed response, each as its fields (id, data, retry, event)."""
    event: dict[str, str] = {}
    async for line in response.aiter_lines():
        if line == "":
            if event:
                yield event
            event = {}
            continue
        field, _, value = line.partition(":")
        event[field] = value.removeprefix(" ")


async def test_a_write_whose_stream_drops_resumes_with_last_event_id(tmp_path: Path, profile: Profile) -> None:
    """A 2025 client loses the write's stream while the prompt is pending; it reconnects with Last-Event-ID,
    gets the prompt again, answers it, and receives the result on the resumed stream. One write happens."""
    config, port = write_config(profile, tmp_path), free_port()
    url, db = f"http://127.0.0.1:{port}/mcp", tmp_path / "backend.db"
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": PROTOCOL,
            "capabilities": {"elicitation": {"form": {}}},
            "clientInfo": {"name": "resuming-client", "version": "1"},
        },
    }
    async with serve(config, port), httpx.AsyncClient(timeout=30) as http:
        opened = await http.post(url, json=initialize, headers=ACCEPT_BOTH)
        session = {**ACCEPT_BOTH, "mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": PROTOCOL}
        await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
        planned = await http.post(
            url,
            json={
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": profile.preview_tool, "arguments": profile.preview_args()},
            },
            headers=session,
        )
        plan = planned.json()["result"]["structuredContent"]
        version = profile.version(db, profile.main)
        call = {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {
                "name": profile.write_tool,
                "arguments": {"planId": plan["planId"], "idempotencyKey": new_key()},
            },
        }

        async with http.stream("POST", url, json=call, headers=session) as streamed:
            assert streamed.headers["content-type"].startswith("text/event-stream")
            received = events(streamed)
            priming = await anext(received)
            prompt = await anext(received)
        # The connection is gone: the client saw the priming event and the prompt, not the answer.
        assert priming["data"] == "" and priming["retry"] == "1000"
        asked = JSONRPCRequest.model_validate_json(prompt["data"])
        assert asked.method == "elicitation/create"
        assert profile.write_count(db) == 0

        resume = {**session, "Accept": "text/event-stream", "last-event-id": priming["id"]}
        async with http.stream("GET", url, headers=resume) as resumed:
            replayed = events(resumed)
            again = await anext(replayed)
            assert JSONRPCRequest.model_validate_json(again["data"]).id == asked.id
            answer = {"jsonrpc": "2.0", "id": asked.id, "result": {"action": "accept", "content": {"confirm": True}}}
            assert (await http.post(url, json=answer, headers=session)).status_code == 202
            final = await anext(replayed)
            while not final["data"]:  # the resumed stream's own priming event
                final = await anext(replayed)
        result = JSONRPCResponse.model_validate_json(final["data"])
        assert result.id == 3
        assert result.result["structuredContent"] == applied_body(plan, version + 1)
        assert profile.write_count(db) == 1

        # A client that missed only the answer gets just that, and the replay ends with it.
        after_prompt = {**resume, "last-event-id": again["id"]}
        async with http.stream("GET", url, headers=after_prompt) as late:
            missed = [event async for event in events(late)]
        assert [JSONRPCResponse.model_validate_json(event["data"]).id for event in missed if event.get("data")] == [3]
    assert profile.write_count(db) == 1


async def test_a_request_without_a_session_that_is_not_post_opens_none(tmp_path: Path, profile: Profile) -> None:
    """A bare GET (or DELETE) of /mcp is refused without handing out a session id that would then answer 404."""
    config, port = write_config(profile, tmp_path), free_port()
    async with serve(config, port), httpx.AsyncClient(timeout=30) as http:
        for method in ("GET", "DELETE"):
            answer = await http.request(method, f"http://127.0.0.1:{port}/mcp", headers=ACCEPT_BOTH)
            assert answer.status_code == 400, (method, answer.text)
            assert "mcp-session-id" not in answer.headers, method
            assert "Missing session ID" in answer.json()["error"]["message"]
