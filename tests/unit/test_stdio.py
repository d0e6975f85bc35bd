"""The stdio reader and writer (gateway/backend/stdio.py) over stand-in pipe transports: stdout's chunks as a pipe
gives them, fed as the event loop feeds them, and a stdin whose write fails. tests/unit/test_lane.py drives both
over a real child's pipes."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import anyio
import pytest
from mcp.shared.message import SessionMessage
from mcp_types import JSONRPCRequest, RequestId

from gateway.backend.stdio import HELD_MESSAGES, StdinWriter, StdoutReader
from gateway.backend.transports import RESULT_TOO_LARGE

pytestmark = pytest.mark.anyio


class _Pipe(asyncio.ReadTransport, asyncio.WriteTransport):
    """A pipe's transport as the event loop gives one: it records pauses and lines, and fails writes once broken."""

    def __init__(self, *, broken: bool = False) -> None:
        super().__init__()
        self.paused, self.broken, self.closing = False, broken, False
        self.pauses = 0
        self.lines: list[bytes] = []

    def pause_reading(self) -> None:
        self.paused, self.pauses = True, self.pauses + 1

    def resume_reading(self) -> None:
        self.paused = False

    def is_closing(self) -> bool:
        return self.closing

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self.broken:
            self.closing = True  # what the loop's pipe transport does when os.write fails
            return
        self.lines.append(bytes(data))


def _fed(chunks: list[bytes], waiting: dict[RequestId, None], max_bytes: int = 200) -> tuple[StdoutReader, _Pipe]:
    """A reader given ``chunks`` as the loop would (none while it has paused the pipe), then the pipe's end."""
    reader, pipe = StdoutReader(max_bytes, waiting), _Pipe()
    reader.connection_made(pipe)
    for chunk in chunks:
        if not pipe.paused:
            reader.data_received(chunk)
    reader.eof_received()
    return reader, pipe


async def _read_all(reader: StdoutReader) -> list[Any]:
    return [item async for item in reader]


def _answer(request_id: int, text: str = "ok") -> bytes:
    result = {"content": [{"type": "text", "text": text}]}
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}).encode() + b"\n"


def _note(n: int) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": n}}).encode() + b"\n"


async def test_stdout_lines_are_read_in_order_whatever_the_chunks_and_answered_requests_stop_waiting() -> None:
    both = _answer(1) + _answer(2)
    waiting: dict[RequestId, None] = {1: None, 2: None, 3: None}
    reader, _ = _fed([both[:10], both[10:60], both[60:] + _answer(3)[:5], _answer(3)[5:]], waiting)
    assert [item.message.id for item in await _read_all(reader)] == [1, 2, 3]
    assert waiting == {}


async def test_an_oversized_stdout_line_answers_its_request_and_the_next_line_still_arrives() -> None:
    waiting: dict[RequestId, None] = {4: None, 5: None}
    huge = _answer(4, "x" * 1000)
    items = await _read_all(_fed([huge[:300], huge[300:] + _answer(5)], waiting)[0])
    assert [(item.message.id, getattr(item.message, "error", None) is not None) for item in items] == [
        (4, True),
        (5, False),
    ]
    assert items[0].message.error.code == RESULT_TOO_LARGE


async def test_an_oversized_notification_is_skipped_and_a_malformed_line_is_handed_on_as_an_error() -> None:
    note = json.dumps({"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": "y" * 1000}})
    items = await _read_all(_fed([note.encode() + b"\n" + b"{not json\n" + _answer(6)], {6: None})[0])
    assert isinstance(items[0], ValueError)
    assert items[1].message.id == 6
    assert len(items) == 2


async def test_an_oversized_line_no_request_can_be_told_from_ends_the_stream_after_what_came_before() -> None:
    waiting: dict[RequestId, None] = {7: None, 8: None, 9: None}
    nameless = b'{"result":{"content":[{"text":"' + b"z" * 1000 + b'"}]}}\n'
    reader, pipe = _fed([_answer(7) + nameless, _answer(8)], waiting)
    assert pipe.paused  # nothing more is read: the session ends
    assert [item.message.id for item in await _read_all(reader)] == [7]


async def test_a_backend_that_floods_notifications_is_not_read_past_what_the_session_holds() -> None:
    reader, pipe = StdoutReader(10_000, {}), _Pipe()
    reader.connection_made(pipe)
    sent = 0
    while not pipe.paused and sent < 10 * HELD_MESSAGES:
        reader.data_received(_note(sent))
        sent += 1
    assert sent == HELD_MESSAGES  # held, not read further, until the SDK takes them
    taken: list[Any] = [await reader.receive() for _ in range(HELD_MESSAGES // 2 + 1)]
    assert not pipe.paused
    reader.data_received(_note(sent))
    reader.eof_received()
    taken += await _read_all(reader)
    assert [item.message.params["data"] for item in taken] == list(range(HELD_MESSAGES + 1))
    assert pipe.pauses == 1


async def test_a_receive_waits_for_the_next_line_and_the_end_wakes_it() -> None:
    reader, pipe = StdoutReader(200, {}), _Pipe()
    reader.connection_made(pipe)
    got: list[Any] = []

    async def take() -> None:
        got.extend(await _read_all(reader))

    async with anyio.create_task_group() as group:
        group.start_soon(take)
        await anyio.wait_all_tasks_blocked()
        reader.data_received(_note(1)[:7])
        await anyio.wait_all_tasks_blocked()
        assert got == []
        reader.data_received(_note(1)[7:])
        await anyio.wait_all_tasks_blocked()
        reader.connection_lost(None)
    assert [item.message.params["data"] for item in got] == [1]


async def test_a_child_that_stopped_reading_ends_the_session_and_the_send_fails() -> None:
    reader, _ = _fed([], {})
    writer = StdinWriter({}, reader)
    writer.connection_made(_Pipe(broken=True))
    request = JSONRPCRequest(jsonrpc="2.0", id=1, method="tools/call", params={"name": "x"})
    with pytest.raises(anyio.BrokenResourceError):
        await writer.send(SessionMessage(request))
    with pytest.raises(anyio.ClosedResourceError):
        await writer.send(SessionMessage(request))
    assert await _read_all(reader) == []


async def test_a_sender_waits_while_the_pipe_is_full_and_fails_when_it_is_lost() -> None:
    reader, pipe = StdoutReader(200, {}), _Pipe()
    writer = StdinWriter({}, reader)
    writer.connection_made(pipe)
    writer.pause_writing()
    sent: list[str] = []

    async def send(text: str, request_id: int) -> None:
        try:
            await writer.send_line(text.encode(), request_id)
            sent.append(text)
        except anyio.BrokenResourceError:
            sent.append("broken")

    async with anyio.create_task_group() as group:
        group.start_soon(send, "first\n", 1)
        await anyio.wait_all_tasks_blocked()
        assert pipe.lines == [b"first\n"] and sent == []  # handed over whole, then waiting for room
        writer.resume_writing()
        await anyio.wait_all_tasks_blocked()
        writer.pause_writing()
        group.start_soon(send, "second\n", 2)
        await anyio.wait_all_tasks_blocked()
        writer.connection_lost(BrokenPipeError())
    assert sent == ["first\n", "broken"]
