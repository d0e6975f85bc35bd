"""The stdio lane (gateway/backend/lane.py) against a real child process that speaks JSON-RPC lines on its pipes,
read as the SDK reads them (a task draining the transport's read stream). Each tool name makes the child do one
thing: answer, answer with an error, never answer, answer past the cap, answer with a malformed result, echo the
id as a string, or exit; another child stops reading its stdin. What reaches the SDK's side is checked too: a
lane's answer never does. Each test runs on asyncio's own event loop and on uvloop's, which ``serve`` runs on."""

from __future__ import annotations

import gc
import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT
from pydantic import ValidationError

from gateway.backend import stdio
from gateway.backend.lane import StdioLane
from gateway.backend.stdio import open_stdio
from gateway.backend.transports import RESULT_TOO_LARGE

pytestmark = pytest.mark.anyio


@pytest.fixture(params=[("asyncio", {}), ("asyncio", {"use_uvloop": True})], ids=["asyncio", "uvloop"])
def anyio_backend(request: pytest.FixtureRequest) -> tuple[str, dict[str, Any]]:
    backend: tuple[str, dict[str, Any]] = request.param
    return backend


CHILD = r"""
import json, sys
for line in sys.stdin:
    message = json.loads(line)
    def say(**fields):
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", **fields}) + "\n")
        sys.stdout.flush()
    if message.get("method") == "notifications/cancelled":
        say(method="notifications/message", params={"level": "info", "data": message["params"]})
        continue
    name, rid = message["params"]["name"], message["id"]
    text = [{"type": "text", "text": json.dumps(message)}]
    if name == "answer":
        say(id=rid, result={"content": text, "structuredContent": {"got": message["params"]["arguments"]}})
    elif name == "error":
        say(id=rid, error={"code": -32602, "message": "no such tool"})
    elif name == "huge":
        say(id=rid, result={"content": [{"type": "text", "text": "x" * 5000}]})
    elif name == "malformed":
        say(id=rid, result={"content": "not a list"})
    elif name == "string-id":
        say(id=str(rid), result={"content": text})
    elif name == "exit":
        sys.exit(0)
"""


@dataclass
class Pipes:
    lane: StdioLane
    to_sdk: list[Any] = field(default_factory=list)
    arrived: anyio.Event = field(default_factory=anyio.Event)


@asynccontextmanager
async def child(max_bytes: int = 1000, script: str = CHILD) -> AsyncIterator[Pipes]:
    params = StdioServerParameters(command=sys.executable, args=["-c", script])
    async with open_stdio(params, max_bytes, sys.stderr) as (reader, writer):
        pipes = Pipes(StdioLane(reader, writer, "2025-11-25"))

        async def drain() -> None:  # what the SDK's reader task does
            async for item in reader:
                pipes.to_sdk.append(item)
                pipes.arrived.set()

        async with anyio.create_task_group() as group:
            group.start_soon(drain)
            yield pipes
            group.cancel_scope.cancel()


async def test_a_call_is_answered_with_the_sdks_result_model_and_the_sdk_never_sees_the_answer() -> None:
    async with child() as pipes:
        sent_args = {"n": 1, "name": "ä"}
        first = await pipes.lane.call_tool("answer", sent_args, 5)
        second = await pipes.lane.call_tool("answer", {}, 5)
    assert first.structured_content == {"got": {"n": 1, "name": "ä"}}
    sent = json.loads(first.content[0].text)  # type: ignore[union-attr]
    assert list(sent) == ["jsonrpc", "id", "method", "params"]
    assert sent == {
        "jsonrpc": "2.0",
        "id": -1,
        "method": "tools/call",
        "params": {"name": "answer", "arguments": sent_args},
    }
    assert '"id": -2' in second.content[0].text  # type: ignore[union-attr]
    assert pipes.to_sdk == []


async def test_an_error_answer_raises_the_backends_error() -> None:
    async with child() as pipes:
        with pytest.raises(MCPError) as raised:
            await pipes.lane.call_tool("error", {}, 5)
    assert (raised.value.error.code, raised.value.error.message) == (-32602, "no such tool")


async def test_an_answer_past_the_cap_is_too_large_and_the_next_call_still_works() -> None:
    async with child(max_bytes=1000) as pipes:
        with pytest.raises(MCPError) as raised:
            await pipes.lane.call_tool("huge", {}, 5)
        assert raised.value.error.code == RESULT_TOO_LARGE
        assert (await pipes.lane.call_tool("answer", {}, 5)).structured_content == {"got": {}}


async def test_a_malformed_result_fails_the_sdks_own_check() -> None:
    async with child() as pipes:
        with pytest.raises(ValidationError):
            await pipes.lane.call_tool("malformed", {}, 5)


async def test_an_id_echoed_as_a_string_still_answers_its_call() -> None:
    async with child() as pipes:
        result = await pipes.lane.call_tool("string-id", {}, 5)
    assert '"id": -1' in result.content[0].text  # type: ignore[union-attr]
    assert pipes.to_sdk == []


async def test_a_call_with_no_answer_times_out_and_tells_the_backend_it_was_abandoned() -> None:
    async with child() as pipes:
        with pytest.raises(MCPError) as raised:
            await pipes.lane.call_tool("silent", {}, 0.2)
        assert raised.value.error.code == REQUEST_TIMEOUT
        with anyio.fail_after(5):
            await pipes.arrived.wait()
    notice = pipes.to_sdk[0].message
    assert notice.method == "notifications/message"
    assert notice.params["data"] == {"requestId": -1, "reason": "timed out after 0.2s"}


async def test_a_cancelled_caller_tells_the_backend_and_the_next_call_still_works() -> None:
    async with child() as pipes:
        with anyio.move_on_after(0.2):
            await pipes.lane.call_tool("silent", {}, 5)
        with anyio.fail_after(5):
            await pipes.arrived.wait()
        assert pipes.to_sdk[0].message.params["data"] == {"requestId": -1, "reason": "caller cancelled"}
        assert (await pipes.lane.call_tool("answer", {}, 5)).structured_content == {"got": {}}


async def test_a_child_that_exits_fails_the_waiting_call_and_every_later_one_without_writing() -> None:
    async with child() as pipes:
        with pytest.raises(MCPError) as raised:
            await pipes.lane.call_tool("exit", {}, 5)
        assert raised.value.error.code == CONNECTION_CLOSED
        with pytest.raises(MCPError) as again:
            await pipes.lane.call_tool("answer", {}, 5)
        assert again.value.error.code == CONNECTION_CLOSED


STOPS_READING = """
import json, os, sys, time
os.close(0)
notice = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "closed"}}
print(json.dumps(notice), flush=True)
time.sleep(30)
"""


async def test_a_child_that_stopped_reading_fails_the_call_as_closed_and_leaves_no_stray_error(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stdio, "STOP_SECONDS", 0.2)  # the child never exits on its own: a short grace at the end
    async with child(script=STOPS_READING) as pipes:
        with anyio.fail_after(5):
            await pipes.arrived.wait()  # its stdin is closed: the write fails
        # At once: the write itself fails (waiting for the child's stdout to end would take its 30 s).
        with pytest.raises(MCPError) as raised, anyio.fail_after(10):
            await pipes.lane.call_tool("answer", {}, 20)
    assert raised.value.error.code == CONNECTION_CLOSED
    del raised  # its traceback holds the call's frame, and so the call's future
    gc.collect()
    assert "never retrieved" not in caplog.text
