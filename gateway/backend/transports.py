"""The two wire transports to the backend, each stopping at ``backend.max_result_bytes`` while it reads.

The SDK's ``stdio_client`` keeps a child's whole stdout line in memory before it parses it, and its streamable
HTTP client reads a whole JSON body: a backend answering 40 MB after a write would be read and parsed in full
before the gateway could refuse it. So the gateway reads both itself, at this one boundary:

    bounded_stdio      spawns the child as stdio_client does (own session, minimal environment, stderr to the
                       log) and stops it as stdio_client does (close stdin, wait, SIGTERM then SIGKILL the group),
                       but reads each line with a cap: past it, the rest of the line is skipped, not kept; lines
                       are read in the receiving task (``StdoutReader``) and written in the sending one
                       (``StdinWriter``), with no task or memory stream of its own between the SDK and the pipes;
                       an answer to a request sent past the SDK (gateway/backend/lane.py) resolves that
                       request's future in the reader, and never reaches the SDK
    CappedTransport    an httpx2 transport that reads each JSON body with a cap (SSE events are capped by the SDK's
                       own ``max_sse_event_size``, which answers an oversized event as a lost connection)

An answer past the cap becomes a JSON-RPC error with code ``RESULT_TOO_LARGE`` for the request it answers (the
id at the start of the line, or else the only request waiting; with several waiting and no id in sight the
connection is dropped, so each of them reads as lost). ``client.McpBackend`` turns that error into a malformed
reply: a write was then still sent and answered, so it is re-read like any other malformed answer.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import Any, TextIO

import anyio
import httpx2
from anyio.abc import Process
from mcp.client._transport import TransportStreams
from mcp.client.stdio import StdioServerParameters, get_default_environment
from mcp.os.posix.utilities import terminate_posix_process_tree
from mcp.shared.dispatcher import coerce_request_id
from mcp.shared.message import SessionMessage
from mcp_types import (
    ErrorData,
    JSONRPCError,
    JSONRPCRequest,
    JSONRPCResponse,
    RequestId,
    jsonrpc_message_adapter,
)

log = logging.getLogger(__name__)

RESULT_TOO_LARGE = -32088
"""The gateway's own JSON-RPC error code (server-error range) for an answer cut off at the cap."""
TOO_LARGE_MESSAGE = "The backend's answer exceeds backend.max_result_bytes"
STOP_SECONDS = 2.0
"""Grace after stdin closes before the child is terminated, and after SIGTERM before SIGKILL (as stdio_client)."""
CHUNK = 65_536
PREFIX = 4_096
"""How much of an oversized line is kept to find the id of the request it answers."""
LEADING = re.compile(rb'^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"(id|method)"\s*:\s*(-?\d+|"[^"\\]*")?')


def too_large(request_id: RequestId) -> JSONRPCError:
    """The error that stands for an answer to ``request_id`` that was cut off at the cap."""
    return JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(code=RESULT_TOO_LARGE, message=TOO_LARGE_MESSAGE))


def names_a_method(prefix: bytes) -> bool:
    """Whether an oversized line starts like a notification or a request from the server (it answers nothing)."""
    found = LEADING.match(prefix)
    return found is not None and found.group(1) == b"method"


def answered_id(prefix: bytes, waiting: dict[RequestId, None]) -> RequestId | None:
    """Which waiting request an oversized line answers, from its first bytes; None when that cannot be told."""
    found = LEADING.match(prefix)
    if found is not None and found.group(1) == b"id" and found.group(2) is not None:
        named: RequestId = json.loads(found.group(2))
        if named in waiting:
            return named
    return next(iter(waiting)) if len(waiting) == 1 else None


class _Overflow(Exception):
    """An oversized line whose request cannot be told: the connection is dropped."""


@asynccontextmanager
async def bounded_stdio(
    params: StdioServerParameters, max_bytes: int, errlog: TextIO
) -> AsyncIterator[TransportStreams]:
    """The backend as a child process over stdin/stdout, each line read with a cap of ``max_bytes``."""
    process = await anyio.open_process(
        [params.command, *params.args],
        env=get_default_environment() | (params.env or {}),
        stderr=errlog,
        cwd=params.cwd,
        start_new_session=True,
    )
    waiting: dict[RequestId, None] = {}  # requests sent and not yet answered, oldest first
    read_stream = StdoutReader(process, max_bytes, waiting)
    write_stream = StdinWriter(process, waiting, read_stream)
    try:
        yield read_stream, write_stream
    finally:
        with anyio.CancelScope(shield=True):
            await _stop(process)
        for stream in (read_stream, write_stream):
            await stream.aclose()


class StdoutReader:
    """The session's read stream: the child's stdout read in the receiver's own task (the SDK's reader), each line
    with the cap, so no task and no memory stream stand between a line and the request it answers. A line past the
    cap answers the request it names (or the only one waiting) with ``too_large``, and a notification past it is
    skipped; one that can be told neither ends the stream."""

    def __init__(self, process: Process, max_bytes: int, waiting: dict[RequestId, None]) -> None:
        assert process.stdout is not None
        self._stdout = process.stdout
        self._max_bytes = max_bytes
        self._waiting = waiting
        self._ready: deque[SessionMessage | Exception] = deque()
        self._line, self._skipping, self._prefix = bytearray(), False, b""
        self._ended = False
        self._lanes: dict[RequestId, asyncio.Future[JSONRPCResponse | JSONRPCError]] = {}

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

    async def receive(self) -> SessionMessage | Exception:
        while not self._ready:
            if self._ended:
                raise anyio.EndOfStream
            try:
                chunk = await self._stdout.receive(CHUNK)
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                self._end()  # the child closed its stdout or is gone: the session sees the stream end
                continue
            try:
                self._feed(chunk)
            except _Overflow:
                log.warning("backend answer exceeds backend.max_result_bytes and names no waiting request; dropped")
                self._end()
        return self._ready.popleft()

    def _end(self) -> None:
        """No more lines: every request sent past the SDK and not yet answered fails, as the SDK's own do."""
        self._ended = True
        lanes, self._lanes = self._lanes, {}
        for answer in lanes.values():
            if not answer.done():
                answer.set_exception(anyio.BrokenResourceError())

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

    async def aclose(self) -> None:
        """No more messages after those already read (the session is over, or the child stopped reading)."""
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


class StdinWriter:
    """The session's write stream: each message written to the child's stdin as one line, in the sender's own
    task (a memory stream and a writing task would cost every call two hand-offs on the event loop). A line is
    written whole before the first await, so concurrent senders never interleave within one."""

    def __init__(self, process: Process, waiting: dict[RequestId, None], reader: StdoutReader) -> None:
        self._process = process
        self._waiting = waiting
        self._reader = reader
        self._closed = False

    async def send(self, session_message: SessionMessage) -> None:
        message = session_message.message
        text = message.model_dump_json(by_alias=True, exclude_unset=True)
        await self.send_line((text + "\n").encode(), message.id if isinstance(message, JSONRPCRequest) else None)

    async def send_line(self, line: bytes, request_id: RequestId | None) -> None:
        """Write one message, already a JSON line; ``request_id`` when it is a request (so that an answer past
        the cap can be told to answer it)."""
        if self._closed:
            raise anyio.ClosedResourceError
        assert self._process.stdin is not None
        if request_id is not None:
            self._waiting[request_id] = None
        try:
            await self._process.stdin.send(line)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError) as exc:
            # The child stopped reading: the session ends (this request reads as lost, and the client drops the
            # connection, which stops the child) rather than hang a request.
            self._closed = True
            await self._reader.aclose()
            raise anyio.BrokenResourceError from exc

    async def aclose(self) -> None:
        self._closed = True

    async def __aenter__(self) -> StdinWriter:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


async def _stop(process: Process) -> None:
    """Close stdin, give the child a grace period to exit, then terminate its whole process group."""
    assert process.stdin is not None
    with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdin.aclose()
    with anyio.move_on_after(STOP_SECONDS):
        # Polled, not process.wait(): on Python 3.11 that also waits for the pipes, which a grandchild may hold.
        while process.returncode is None:  # noqa: ASYNC110
            await anyio.sleep(0.01)
    if process.returncode is None:
        await terminate_posix_process_tree(process, STOP_SECONDS)


class CappedTransport(httpx2.AsyncBaseTransport):
    """An httpx2 transport whose JSON response bodies are read with a cap of ``max_bytes``."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, max_bytes: int) -> None:
        self._inner = inner
        self._max_bytes = max_bytes

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        if not response.headers.get("content-type", "").lower().startswith("application/json"):
            return response
        body = bytearray()
        try:
            async for chunk in response.stream:  # type: ignore[union-attr]
                body += chunk
                if len(body) > self._max_bytes:
                    log.warning("backend answer exceeds backend.max_result_bytes; cut off while reading")
                    return _too_large_response(request)
        finally:
            await response.aclose()
        headers = [(name, value) for name, value in response.headers.multi_items() if name.lower() != "content-length"]
        return httpx2.Response(response.status_code, headers=headers, content=bytes(body), request=request)

    async def aclose(self) -> None:
        await self._inner.aclose()


def _too_large_response(request: httpx2.Request) -> httpx2.Response:
    """A JSON-RPC error for the request this body answered (nothing for a notification)."""
    try:
        sent: Any = json.loads(request.content)
    except ValueError:
        sent = None
    if not isinstance(sent, dict) or "id" not in sent:
        return httpx2.Response(202, request=request)
    body = too_large(sent["id"]).model_dump(by_alias=True, mode="json", exclude_none=True)
    return httpx2.Response(200, json=body, request=request)
