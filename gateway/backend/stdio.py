"""A backend as a stdio child process: started, read, written and stopped by the gateway itself, on the event loop's
own pipe transports.

    open_stdio(params, max_bytes, errlog)   the child, started as the SDK's ``stdio_client`` starts one (a session
                                            of its own, a minimal environment and ``params.env``, stderr to the
                                            log) with the standard library's ``subprocess`` (only stdin, stdout
                                            and stderr reach it), and stopped as ``stdio_client`` stops one (stdin
                                            closed, a grace period, then SIGTERM and SIGKILL to its whole group)
    StdoutReader      the SDK session's read stream, and the stdout pipe's protocol: each chunk is cut into lines as
                      it arrives, each line read with the cap (past it, the rest of the line is skipped, not kept);
                      an answer to a request sent past the SDK (gateway/backend/lane.py) resolves that request's
                      future right there, with no task woken to read it; anything else waits for the SDK's reader
    StdinWriter       the SDK session's write stream over the stdin pipe's transport: each message one line, written
                      whole at once in the sender's own task

What an answer past the cap becomes is gateway/backend/transports.py's (``too_large``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import NoReturn, TextIO, cast

import anyio
from mcp.client.stdio import StdioServerParameters, get_default_environment
from mcp.shared.dispatcher import coerce_request_id
from mcp.shared.message import SessionMessage
from mcp_types import JSONRPCError, JSONRPCRequest, JSONRPCResponse, RequestId, jsonrpc_message_adapter

from gateway.backend.transports import PREFIX, answered_id, names_a_method, too_large

log = logging.getLogger(__name__)

STOP_SECONDS = 2.0
"""Grace after stdin closes before the child is terminated, and after SIGTERM before SIGKILL (as stdio_client)."""
HELD_MESSAGES = 64
"""Messages for the SDK read and not yet taken: past this many, stdout is not read until the SDK catches up."""
POLL_SECONDS = 0.01


class _Overflow(Exception):
    """An oversized line whose request cannot be told: the connection is dropped."""


@asynccontextmanager
async def open_stdio(
    params: StdioServerParameters, max_bytes: int, errlog: TextIO
) -> AsyncIterator[tuple[StdoutReader, StdinWriter]]:
    """The backend as a child process over stdin/stdout, each line read with a cap of ``max_bytes``."""
    child = subprocess.Popen(  # noqa: ASYNC220 - a fork and exec, as asyncio's own subprocess transport makes it
        [params.command, *params.args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=errlog,
        env=get_default_environment() | (params.env or {}),
        cwd=params.cwd,
        start_new_session=True,
        close_fds=True,
    )
    assert child.stdin is not None and child.stdout is not None
    loop = asyncio.get_running_loop()
    waiting: dict[RequestId, None] = {}  # requests sent and not yet answered, oldest first
    reader, writer, stdout = StdoutReader(max_bytes, waiting), None, None
    try:
        stdout, _ = await loop.connect_read_pipe(lambda: reader, child.stdout)
        _, writer = await loop.connect_write_pipe(lambda: StdinWriter(waiting, reader), child.stdin)
        yield reader, writer
    finally:
        with anyio.CancelScope(shield=True):
            await _stop(child, writer)
        reader.aclose_now()
        if writer is not None:
            writer.abort()
        if stdout is not None:
            stdout.close()  # a grandchild may still hold the pipe's other end: it is not waited for
        for pipe in (child.stdin, child.stdout):
            pipe.close()


class StdoutReader(asyncio.Protocol):
    """The session's read stream, fed by the child's stdout as it arrives. A line past the cap answers the request
    it names (or the only one waiting) with ``too_large``, and a notification past it is skipped; one that can be
    told neither ends the stream, and nothing after it is read."""

    def __init__(self, max_bytes: int, waiting: dict[RequestId, None]) -> None:
        self._max_bytes = max_bytes
        self._waiting = waiting
        self._ready: deque[SessionMessage | Exception] = deque()
        self._line, self._skipping, self._prefix = bytearray(), False, b""
        self._ended = False
        self._lanes: dict[RequestId, asyncio.Future[JSONRPCResponse | JSONRPCError]] = {}
        self._transport: asyncio.ReadTransport | None = None
        self._paused = False
        self._wake: asyncio.Future[None] | None = None

    def expect(self, request_id: RequestId, answer: asyncio.Future[JSONRPCResponse | JSONRPCError]) -> None:
        """Resolve ``answer`` with the answer to ``request_id`` (a request the SDK did not send) when it is read;
        fail it when the stream ends first. BrokenResourceError when it has ended already."""
        if self._ended:
            raise anyio.BrokenResourceError
        self._lanes[request_id] = answer

    def forget(self, request_id: RequestId) -> None:
        """Stop waiting for ``request_id`` (answered, timed out or abandoned): a late answer is dropped."""
        self._lanes.pop(request_id, None)
        self._waiting.pop(request_id, None)

    # The pipe's side (asyncio.Protocol): called by the event loop as stdout is read.

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.ReadTransport, transport)  # uvloop's are not asyncio's classes

    def data_received(self, data: bytes) -> None:
        if self._ended:
            return
        try:
            self._feed(data)
        except _Overflow:
            log.warning("backend answer exceeds backend.max_result_bytes and names no waiting request; dropped")
            self._end()
        if self._ended or len(self._ready) >= HELD_MESSAGES:
            self._pause()
        if self._ready:
            self._woken()

    def eof_received(self) -> bool:
        self._end()  # the child closed its stdout or is gone: the session sees the stream end
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._end()

    # The session's side (a read stream): the SDK's reader task takes messages here.

    async def receive(self) -> SessionMessage | Exception:
        while not self._ready:
            if self._ended:
                raise anyio.EndOfStream
            self._wake = asyncio.get_running_loop().create_future()
            try:
                await self._wake
            finally:
                self._wake = None
        message = self._ready.popleft()
        if self._paused and not self._ended and len(self._ready) < HELD_MESSAGES // 2:
            self._paused = False
            if self._transport is not None:
                self._transport.resume_reading()
        return message

    async def aclose(self) -> None:
        """No more messages after those already read (the session is over, or the child stopped reading)."""
        self.aclose_now()

    def aclose_now(self) -> None:
        self._end()

    def __aiter__(self) -> StdoutReader:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> StdoutReader:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def _pause(self) -> None:
        if not self._paused and self._transport is not None and not self._transport.is_closing():
            self._paused = True
            self._transport.pause_reading()

    def _woken(self) -> None:
        if self._wake is not None and not self._wake.done():
            self._wake.set_result(None)

    def _end(self) -> None:
        """No more lines: every request sent past the SDK and not yet answered fails, as the SDK's own do."""
        if self._ended:
            return
        self._ended = True
        lanes, self._lanes = self._lanes, {}
        for answer in lanes.values():
            if not answer.done():
                answer.set_exception(anyio.BrokenResourceError())
        self._woken()

    def _feed(self, chunk: bytes) -> None:
        while chunk:
            end = chunk.find(b"\n")
            part, chunk = (chunk, b"") if end < 0 else (chunk[:end], chunk[end + 1 :])
            if not self._skipping:
                self._line += part
                if len(self._line) > self._max_bytes:
                    self._skipping, self._prefix = True, bytes(self._line[:PREFIX])
                    self._line = bytearray()
            if end >= 0:
                self._deliver(None if self._skipping else bytes(self._line), self._prefix)
                self._line, self._skipping, self._prefix = bytearray(), False, b""

    def _deliver(self, line: bytes | None, prefix: bytes) -> None:
        if line is None:
            if names_a_method(prefix):
                log.warning("backend sent a message past backend.max_result_bytes that answers nothing; skipped")
                return
            request_id = answered_id(prefix, self._waiting)
            if request_id is None:
                raise _Overflow
            log.warning("backend answer exceeds backend.max_result_bytes; cut off while reading")
            self._waiting.pop(request_id, None)
            self._answer(too_large(request_id))
            return
        try:
            message = jsonrpc_message_adapter.validate_json(line, by_name=False)
        except ValueError as exc:
            self._ready.append(exc)
            return
        if isinstance(message, JSONRPCResponse | JSONRPCError) and message.id is not None:
            self._waiting.pop(message.id, None)
            self._answer(message)
            return
        self._ready.append(SessionMessage(message))

    def _answer(self, message: JSONRPCResponse | JSONRPCError) -> None:
        """To the request sent past the SDK that it answers, or else to the SDK."""
        answer = self._lanes.pop(coerce_request_id(message.id), None) if message.id is not None else None
        if answer is None:
            self._ready.append(SessionMessage(message))
        elif not answer.done():
            answer.set_result(message)


class StdinWriter(asyncio.Protocol):
    """The session's write stream: each message written to the child's stdin as one line, in the sender's own
    task. A line is handed to the pipe's transport whole before any await, so concurrent senders never interleave
    within one; a sender waits only while the transport holds more than its high-water mark unwritten."""

    def __init__(self, waiting: dict[RequestId, None], reader: StdoutReader) -> None:
        self._waiting = waiting
        self._reader = reader
        self._transport: asyncio.WriteTransport | None = None
        self._closed = False
        self._lost = False
        self._paused = False
        self._drained: asyncio.Future[None] | None = None

    async def send(self, session_message: SessionMessage) -> None:
        message = session_message.message
        text = message.model_dump_json(by_alias=True, exclude_unset=True)
        await self.send_line((text + "\n").encode(), message.id if isinstance(message, JSONRPCRequest) else None)

    async def send_line(self, line: bytes, request_id: RequestId | None) -> None:
        """Write one message, already a JSON line; ``request_id`` when it is a request (so that an answer past
        the cap can be told to answer it)."""
        if self._closed:
            raise anyio.ClosedResourceError
        if request_id is not None:
            self._waiting[request_id] = None
        transport = self._transport
        if transport is None or self._lost or transport.is_closing():
            self._broken()
        transport.write(line)
        if transport.is_closing():  # the write failed: the child closed its stdin
            self._broken()
        while self._paused and not self._lost:
            self._drained = asyncio.get_running_loop().create_future()
            try:
                await self._drained
            finally:
                self._drained = None
        if self._lost:
            self._broken()

    def _broken(self) -> NoReturn:
        """The child stopped reading: the session ends (this request reads as lost, and the client drops the
        connection, which stops the child) rather than hang a request."""
        self._closed = True
        self._reader.aclose_now()
        raise anyio.BrokenResourceError

    async def aclose(self) -> None:
        self._closed = True

    def close_pipe(self) -> None:
        """Close stdin once what is buffered is written: the child reads the end of its input."""
        if self._transport is not None:
            self._transport.close()

    def abort(self) -> None:
        """Drop whatever is still buffered for stdin (a child that stopped reading, or a grandchild holding its
        other end): the pipe closes now. Closed already, with nothing buffered, it has nothing to do."""
        self._closed = True
        transport = self._transport
        if transport is not None and not self._lost and transport.get_write_buffer_size():
            transport.abort()

    async def __aenter__(self) -> StdinWriter:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # The pipe's side (asyncio.Protocol), with the transport's flow control.

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.WriteTransport, transport)

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        self._release()

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        self._release()

    def _release(self) -> None:
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)


async def _stop(child: subprocess.Popen[bytes], writer: StdinWriter | None) -> None:
    """Close stdin, give the child a grace period to exit, then terminate its whole process group."""
    if writer is not None:
        writer.close_pipe()
    else:
        with suppress(OSError):
            child.stdin.close()  # type: ignore[union-attr]
    with anyio.move_on_after(STOP_SECONDS):
        while child.poll() is None:  # noqa: ASYNC110 - a child started outside the loop is polled, not watched
            await anyio.sleep(POLL_SECONDS)
    if child.poll() is None:
        await _terminate_group(child)


async def _terminate_group(child: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the child's process group, SIGKILL to whatever is left after ``STOP_SECONDS`` (as the SDK's
    ``terminate_posix_process_tree``; the group's id is the child's pid, for it leads its own session)."""
    group = child.pid
    try:
        os.killpg(group, signal.SIGTERM)
    except ProcessLookupError:
        child.poll()
        return
    except PermissionError:
        log.warning("no permission to signal some of backend process group %d; waiting for it anyway", group)
    with anyio.move_on_after(STOP_SECONDS):
        while _group_alive(group):
            child.poll()  # reaps the leader: a group with a zombie leader still reads as alive
            await anyio.sleep(POLL_SECONDS)
        return
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(group, signal.SIGKILL)
    with anyio.move_on_after(STOP_SECONDS):
        while child.poll() is None:  # noqa: ASYNC110
            await anyio.sleep(POLL_SECONDS)


def _group_alive(group: int) -> bool:
    """Signal 0 to the group: only ESRCH says it is gone."""
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
