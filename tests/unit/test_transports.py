"""The backend transports' caps: which request an oversized stdio line answers, the stdio reader over chunks as a
pipe gives them, and an HTTP body cut off at the cap becoming a JSON-RPC error for its request (httpx2's in-memory
MockTransport stands in for the network)."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import anyio
import httpx2
import pytest
from mcp.shared.message import SessionMessage
from mcp_types import JSONRPCRequest, RequestId

from gateway.backend.transports import (
    RESULT_TOO_LARGE,
    CappedTransport,
    StdinWriter,
    StdoutReader,
    answered_id,
    names_a_method,
)

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("prefix", "waiting", "answers"),
    [
        (b'{"jsonrpc":"2.0","id":7,"result":{"content":[{"text":"xxxx', {3: None, 7: None}, 7),
        (b'{ "id" : "a-1", "jsonrpc": "2.0", "result": {', {"a-1": None, 2: None}, "a-1"),
        (b'{"result":{"content":[{"text":"xxxx', {5: None}, 5),  # no id in sight, one request waiting
        (b'{"result":{"content":[{"text":"xxxx', {5: None, 6: None}, None),  # which one? cannot be told
        (b'{"jsonrpc":"2.0","id":9,"result":', {5: None, 6: None}, None),  # names a request nobody waits for
    ],
)
def test_an_oversized_line_answers_the_request_it_names_or_the_only_one_waiting(
    prefix: bytes, waiting: dict[int | str, None], answers: int | str | None
) -> None:
    assert answered_id(prefix, waiting) == answers


def test_an_oversized_notification_answers_nothing() -> None:
    assert names_a_method(b'{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"xxx')
    assert not names_a_method(b'{"jsonrpc":"2.0","id":1,"result":{}}')


def _backend(body: bytes, content_type: str = "application/json") -> httpx2.MockTransport:
    return httpx2.MockTransport(
        lambda request: httpx2.Response(200, content=body, headers={"content-type": content_type})
    )


async def _post(transport: httpx2.AsyncBaseTransport, message: dict[str, object]) -> httpx2.Response:
    async with httpx2.AsyncClient(transport=transport) as client:
        return await client.post("http://backend.test/mcp", json=message)


async def test_a_json_body_past_the_cap_becomes_a_too_large_error_for_its_request() -> None:
    huge = json.dumps({"jsonrpc": "2.0", "id": 4, "result": {"padding": "x" * 5000}}).encode()
    answer = await _post(CappedTransport(_backend(huge), 1000), {"jsonrpc": "2.0", "id": 4, "method": "tools/call"})
    assert answer.json()["id"] == 4 and answer.json()["error"]["code"] == RESULT_TOO_LARGE


async def test_a_body_within_the_cap_and_a_stream_pass_through_unchanged() -> None:
    small = json.dumps({"jsonrpc": "2.0", "id": 4, "result": {}}).encode()
    within = await _post(CappedTransport(_backend(small), 1000), {"jsonrpc": "2.0", "id": 4, "method": "ping"})
    stream = b"event: message\ndata: " + b"x" * 5000 + b"\n\n"
    sse = await _post(CappedTransport(_backend(stream, "text/event-stream"), 1000), {"id": 5})
    assert within.content == small
    assert sse.content == stream  # SSE events are capped by the SDK's own max_sse_event_size


async def test_a_notification_past_the_cap_is_accepted_and_dropped() -> None:
    huge = b'{"padding": "' + b"x" * 5000 + b'"}'
    answer = await _post(CappedTransport(_backend(huge), 1000), {"jsonrpc": "2.0", "method": "notifications/x"})
    assert answer.status_code == 202 and answer.content == b""


class _Pipe:
    """A child's stdout as anyio gives it: the chunks given, then the end."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = list(chunks)

    async def receive(self, max_bytes: int = 65536) -> bytes:
        if not self.chunks:
            raise anyio.EndOfStream
        return self.chunks.pop(0)


class _BrokenStdin:
    async def send(self, item: bytes) -> None:
        raise BrokenPipeError


def _reader(chunks: list[bytes], waiting: dict[RequestId, None], max_bytes: int = 200) -> StdoutReader:
    return StdoutReader(SimpleNamespace(stdout=_Pipe(chunks)), max_bytes, waiting)  # type: ignore[arg-type]


async def _read_all(reader: StdoutReader) -> list[Any]:
    return [item async for item in reader]


def _answer(request_id: int, text: str = "ok") -> bytes:
    result = {"content": [{"type": "text", "text": text}]}
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}).encode() + b"\n"


async def test_stdout_lines_are_read_in_order_whatever_the_chunks_and_answered_requests_stop_waiting() -> None:
    both = _answer(1) + _answer(2)
    waiting: dict[RequestId, None] = {1: None, 2: None, 3: None}
    items = await _read_all(_reader([both[:10], both[10:60], both[60:] + _answer(3)[:5], _answer(3)[5:]], waiting))
    assert [item.message.id for item in items] == [1, 2, 3]
    assert waiting == {}


async def test_an_oversized_stdout_line_answers_its_request_and_the_next_line_still_arrives() -> None:
    waiting: dict[RequestId, None] = {4: None, 5: None}
    huge = _answer(4, "x" * 1000)
    items = await _read_all(_reader([huge[:300], huge[300:] + _answer(5)], waiting))
    assert [(item.message.id, getattr(item.message, "error", None) is not None) for item in items] == [
        (4, True),
        (5, False),
    ]
    assert items[0].message.error.code == RESULT_TOO_LARGE


async def test_an_oversized_notification_is_skipped_and_a_malformed_line_is_handed_on_as_an_error() -> None:
    note = json.dumps({"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": "y" * 1000}})
    items = await _read_all(_reader([note.encode() + b"\n" + b"{not json\n" + _answer(6)], {6: None}))
    assert isinstance(items[0], ValueError)
    assert items[1].message.id == 6
    assert len(items) == 2


async def test_an_oversized_line_no_request_can_be_told_from_ends_the_stream_after_what_came_before() -> None:
    waiting: dict[RequestId, None] = {7: None, 8: None, 9: None}
    nameless = b'{"result":{"content":[{"text":"' + b"z" * 1000 + b'"}]}}\n'
    pipe = _Pipe([_answer(7) + nameless, _answer(8)])
    items = await _read_all(StdoutReader(SimpleNamespace(stdout=pipe), 200, waiting))  # type: ignore[arg-type]
    assert [item.message.id for item in items] == [7]
    assert pipe.chunks == [_answer(8)]  # nothing more is read: the session ends


async def test_a_child_that_stopped_reading_ends_the_session_and_the_send_fails() -> None:
    reader = _reader([], {})
    writer = StdinWriter(SimpleNamespace(stdin=_BrokenStdin()), {}, reader)  # type: ignore[arg-type]
    request = JSONRPCRequest(jsonrpc="2.0", id=1, method="tools/call", params={"name": "x"})
    with pytest.raises(anyio.BrokenResourceError):
        await writer.send(SessionMessage(request))
    with pytest.raises(anyio.ClosedResourceError):
        await writer.send(SessionMessage(request))
    assert await _read_all(reader) == []
