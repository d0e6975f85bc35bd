"""A lean MCP client over streamable HTTP, on one keep-alive connection: 2025-11-25 (initialize, then calls in the
session) or 2026-07-28 (no handshake: every request carries its envelope in ``_meta`` and the routing headers).

The load generator uses it instead of the SDK client so that every server under test is driven by the same,
cheap client: the SDK client re-validates ``structuredContent`` against the tool's outputSchema (the gateway
declares one, the raw backend does not), which would bill client work to the gateway. It speaks the real wire
protocol: the handshake, the session header, JSON or SSE answers.

HTTP/1.1 is spoken here too (``Connection``: one socket, requests one after another, bodies by length or chunked),
not by httpx: on the bench machine httpx cost the load generator 1.1 ms of CPU per call against 0.2 ms for this,
more than the gateway's own 0.9 ms, so at 32 clients the load generator, not the servers, set the pace
(bench/RESULTS.md). What a server sees is the same: a POST with the same headers and body on a kept-alive
connection.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

PROTOCOL = "2025-11-25"
STATELESS = "2026-07-28"
ACCEPT = "application/json, text/event-stream"
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": STATELESS,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "0"},
}
"""What a 2026-07-28 request carries in ``params._meta`` instead of a handshake."""


class WireError(Exception):
    """The server answered with a JSON-RPC error, an unexpected status, or no answer to our request."""


class WireClient:
    """One MCP session on one HTTP/1.1 keep-alive connection."""

    def __init__(self, url: str, *, protocol: str = PROTOCOL, timeout: float = 60.0) -> None:
        self.url = url
        self.protocol = protocol
        self._http = Connection(url, timeout)
        self._ids = itertools.count(1)
        self._headers = {"Content-Type": "application/json", "Accept": ACCEPT}

    async def __aenter__(self) -> WireClient:
        if self.protocol == STATELESS:
            self._headers["mcp-protocol-version"] = STATELESS
            return self
        result = await self.request(
            "initialize",
            {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}},
        )
        self._headers["mcp-protocol-version"] = str(result.get("protocolVersion", PROTOCOL))
        await self._post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        session = self._headers.get("mcp-session-id")
        try:
            if session is not None:
                await self._http.send("DELETE", self._headers)
        except (OSError, TimeoutError, asyncio.IncompleteReadError, ValueError):
            pass
        await self._http.aclose()

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """The ``tools/call`` result as a dict (``isError`` results included)."""
        return await self.request("tools/call", {"name": name, "arguments": arguments})

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send one request and return its result."""
        request_id = next(self._ids)
        headers = self._headers
        if self.protocol == STATELESS:
            params = {**params, "_meta": ENVELOPE}
            headers = {**headers, "mcp-method": method}
            if method == "tools/call":
                headers["mcp-name"] = str(params["name"])
        body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        response = await self._post(body, headers)
        if "mcp-session-id" in response.headers:
            self._headers["mcp-session-id"] = response.headers["mcp-session-id"]
        for message in _messages(response):
            if message.get("id") == request_id:
                if "error" in message:
                    raise WireError(f"{method}: {message['error']}")
                return dict(message["result"])
        raise WireError(f"{method}: no answer in a {response.status_code} response")

    async def _post(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> Response:
        try:
            response = await self._http.send("POST", headers or self._headers, json.dumps(body).encode())
        except (OSError, TimeoutError, asyncio.IncompleteReadError, ValueError) as exc:
            raise WireError(f"{type(exc).__name__}: {exc}") from exc
        if response.status_code >= 400:
            raise WireError(f"HTTP {response.status_code}: {response.text[:200]}")
        return response


@dataclass
class Response:
    status_code: int
    headers: dict[str, str]
    """Names in lower case; a repeated header keeps its last value."""
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")


class Connection:
    """One kept-alive HTTP/1.1 connection to ``url``'s server, opened at the first request and again after the
    server closed it (said so, or was seen to while the connection was idle); each request waits for its whole
    answer (``timeout`` seconds at most) before the next."""

    def __init__(self, url: str, timeout: float) -> None:
        parts = urlsplit(url)
        assert parts.scheme == "http" and parts.hostname is not None, url
        self._address = (parts.hostname, parts.port or 80)
        self._authority = parts.netloc
        self._path = parts.path or "/"
        self._timeout = timeout
        self._streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def send(self, method: str, headers: dict[str, str], body: bytes = b"") -> Response:
        if self._streams is not None and self._streams[0].at_eof():  # the server closed it while it was idle
            await self.aclose()
        if self._streams is None:
            self._streams = await asyncio.wait_for(asyncio.open_connection(*self._address), self._timeout)
        reader, writer = self._streams
        lines = [f"{method} {self._path} HTTP/1.1", f"host: {self._authority}", f"content-length: {len(body)}"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
        try:
            response = await asyncio.wait_for(_read_response(reader), self._timeout)
        except BaseException:
            await self.aclose()  # mid-answer: the connection's state is unknown
            raise
        if response.headers.get("connection", "").lower() == "close":
            await self.aclose()
        return response

    async def aclose(self) -> None:
        if self._streams is not None:
            self._streams[1].close()
            self._streams = None


async def _read_response(reader: asyncio.StreamReader) -> Response:
    head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
    status = int(head[0].split(" ", 2)[1])
    headers = {}
    for line in head[1:]:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    if "content-length" in headers:
        return Response(status, headers, await reader.readexactly(int(headers["content-length"])))
    if headers.get("transfer-encoding", "").lower() != "chunked":
        return Response(status, headers, await reader.read())  # until the server closes
    chunks = []
    while size := int((await reader.readuntil(b"\r\n")).split(b";")[0], 16):
        chunks.append(await reader.readexactly(size))
        await reader.readexactly(2)
    while await reader.readuntil(b"\r\n") != b"\r\n":  # trailers, if any, up to the blank line
        pass
    return Response(status, headers, b"".join(chunks))


def _messages(response: Response) -> list[dict[str, Any]]:
    if response.status_code == 202 or not response.content:
        return []
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        return [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")]
    return [json.loads(response.content)]


def tool_text(result: dict[str, Any]) -> str:
    """The first text block of a tool result."""
    for block in result.get("content", []):
        if block.get("type") == "text":
            return str(block["text"])
    return ""


async def drive(url: str, calls: int, protocol: str, warmup: int = 100) -> None:
    """One client calling ``list_tenants {}``: ``warmup`` calls, the line "warm" on stdout, ``calls`` more, then the
    line "done" (``bench.profile --http`` profiles the server between the two lines)."""
    async with WireClient(url, protocol=protocol) as client:
        for _ in range(warmup):
            await client.call_tool("list_tenants", {})
        print("warm", flush=True)
        for _ in range(calls):
            result = await client.call_tool("list_tenants", {})
            if result.get("isError"):
                raise WireError(tool_text(result)[:200])
    print("done", flush=True)


if __name__ == "__main__":
    import sys

    import anyio

    anyio.run(drive, sys.argv[1], int(sys.argv[2]), sys.argv[3])
