"""The two wire transports to the backend, each stopping at ``backend.max_result_bytes`` while it reads.

The SDK's ``stdio_client`` keeps a child's whole stdout line in memory before it parses it, and its streamable
HTTP client reads a whole JSON body: a backend answering 40 MB after a write would be read and parsed in full
before the gateway could refuse it. So the gateway reads both itself, at this one boundary:

    gateway/backend/stdio.py   a stdio child's stdout, each line read with a cap: past it, the rest of the line
                               is skipped, not kept (``open_stdio``, with what it starts and stops)
    CappedTransport            an httpx2 transport that reads each JSON body with a cap (SSE events are capped by
                               the SDK's own ``max_sse_event_size``, which answers an oversized event as a lost
                               connection)

An answer past the cap becomes a JSON-RPC error with code ``RESULT_TOO_LARGE`` for the request it answers (the
id at the start of the line, or else the only request waiting; with several waiting and no id in sight the
connection is dropped, so each of them reads as lost). ``client.McpBackend`` turns that error into a malformed
reply: a write was then still sent and answered, so it is re-read like any other malformed answer.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

import httpx2
from mcp_types import ErrorData, JSONRPCError, RequestId

log = logging.getLogger(__name__)

RESULT_TOO_LARGE = -32088
"""The gateway's own JSON-RPC error code (server-error range) for an answer cut off at the cap."""
TOO_LARGE_MESSAGE = "The backend's answer exceeds backend.max_result_bytes"
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
