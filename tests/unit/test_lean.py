"""The lean path (gateway/http/lean.py): a result goes out as the SDK's ``_write`` sends it, byte for byte, and the
slow answer's event stream opens as the SDK's does, whenever the read ends relative to the task that pings."""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.server import _streamable_http_modern as modern

from gateway.http.lean import _SlowAnswer, _write_result

pytestmark = pytest.mark.anyio


def _recorder() -> tuple[list[Any], Any]:
    sent: list[Any] = []

    async def send(message: Any) -> None:
        sent.append(message.get("body", message["type"]))

    return sent, send


RESULTS = [
    {"content": [{"type": "text", "text": 'ünïcode \u2028 "quoted" <tag>'}], "isError": False},
    {"structuredContent": {"gone": None, "nested": {"also": None, "list": [None, 1.5, -0.0, 10**30, True]}}},
    {"content": [], "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "g", "version": "1"}}, "ttlMs": 0},
]


@pytest.mark.parametrize("request_id", [7, "a-string", 0, -1])
@pytest.mark.parametrize("result", RESULTS, ids=["text", "nulls-and-numbers", "meta"])
async def test_a_result_is_written_as_the_sdk_writes_it(request_id: int | str, result: dict[str, Any]) -> None:
    reply = types.JSONRPCResponse(jsonrpc="2.0", id=request_id, result=result)
    ours: list[Any] = []
    theirs: list[Any] = []
    await _write_result(reply, {"type": "http"}, _never, _appending(ours))
    await modern._write(reply, {"type": "http"}, _never, _appending(theirs))
    assert ours == theirs  # status, headers (length and type) and body


def _appending(messages: list[Any]) -> Any:
    async def send(message: Any) -> None:
        messages.append(message)

    return send


async def _never() -> Any:
    raise AssertionError("an answer reads nothing")


async def test_a_read_that_ends_before_the_pinging_task_runs_still_opens_with_headers_and_a_ping() -> None:
    sent, send = _recorder()
    stream = _SlowAnswer(send)
    stream.open()  # the window ended ...
    await stream.stop()  # ... and the read ended before the pinging task ran
    await stream.finish(b"event: message\r\ndata: {}\r\n\r\n")
    assert sent == ["http.response.start", b": ping\r\n\r\n", b"event: message\r\ndata: {}\r\n\r\n"]


async def test_a_read_that_ends_after_the_first_ping_gets_no_second_one() -> None:
    sent, send = _recorder()
    stream = _SlowAnswer(send)
    stream.open()
    await anyio.sleep(0.01)  # the pinging task sends its headers and first ping, then waits out the window
    await stream.stop()
    await stream.finish(b"last")
    assert sent == ["http.response.start", b": ping\r\n\r\n", b"last"]
