"""The bench's load generator speaks HTTP/1.1 itself (bench/wire.py): against a real uvicorn it reads answers by
length and chunked (an event stream), an empty 202, a server that closes the connection after an answer (the next
request opens another), and keeps one connection for a session's requests otherwise; a connection the server closed
while it was idle is opened again. Its figures rest on it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from bench.wire import STATELESS, WireClient, WireError
from tests.support.asgi import serve_asgi
from tests.support.processes import free_port

pytestmark = pytest.mark.anyio


def server(seen: list[dict[str, Any]]) -> Starlette:
    """An MCP-shaped endpoint: each call's answer in the form its tool's name asks for."""

    async def mcp(request: Request) -> Response:
        client = request.scope["client"]
        if request.method == "DELETE":
            seen.append({"body": {"method": "DELETE"}, "headers": dict(request.headers), "peer": client[1]})
            return Response()
        body = json.loads(await request.body())
        seen.append({"body": body, "headers": dict(request.headers), "peer": client[1] if client else None})
        if "id" not in body:
            return Response(status_code=202)
        if body["method"] == "initialize":
            result = {"protocolVersion": "2025-11-25", "capabilities": {}, "serverInfo": {"name": "s", "version": "1"}}
            opened = {"jsonrpc": "2.0", "id": body["id"], "result": result}
            return JSONResponse(opened, headers={"mcp-session-id": "s1"})
        name = body["params"]["name"]
        answer = {"jsonrpc": "2.0", "id": body["id"], "result": {"content": [{"type": "text", "text": name}]}}
        if name == "streamed":

            async def events() -> AsyncIterator[bytes]:
                yield b": ping\r\n\r\n"
                yield b"event: message\r\ndata: " + json.dumps(answer).encode() + b"\r\n\r\n"

            return StreamingResponse(events(), media_type="text/event-stream")
        if name == "closing":
            return JSONResponse(answer, headers={"connection": "close"})
        if name == "refused":
            return JSONResponse({"error": "no"}, status_code=403)
        return JSONResponse(answer)

    return Starlette(routes=[Route("/mcp", mcp, methods=["POST", "DELETE"])])


async def test_the_load_generator_reads_every_answer_form_on_kept_alive_connections() -> None:
    seen: list[dict[str, Any]] = []
    port = free_port()
    async with serve_asgi(server(seen), port):
        async with WireClient(f"http://127.0.0.1:{port}/mcp") as client:  # 2025-11-25: initialize, initialized
            plain = await client.call_tool("plain", {})
            streamed = await client.call_tool("streamed", {})
            closing = await client.call_tool("closing", {})
            after = await client.call_tool("after", {})
            with pytest.raises(WireError, match="HTTP 403"):
                await client.call_tool("refused", {})
        async with WireClient(f"http://127.0.0.1:{port}/mcp", protocol=STATELESS) as modern:
            await modern.call_tool("plain", {})
    texts = [result["content"][0]["text"] for result in (plain, streamed, closing, after)]
    assert texts == ["plain", "streamed", "closing", "after"]
    methods = [each["body"].get("method") for each in seen]
    assert methods == ["initialize", "notifications/initialized", *["tools/call"] * 5, "DELETE", "tools/call"]
    peers = [each["peer"] for each in seen]
    assert len(set(peers[:5])) == 1  # one connection up to the answer that closed it ...
    assert peers[5] != peers[4] and peers[5] == peers[6] == peers[7]  # ... then another, kept again
    assert seen[3]["headers"]["mcp-session-id"] == seen[7]["headers"]["mcp-session-id"] == "s1"
    stateless = seen[-1]
    assert stateless["headers"]["mcp-protocol-version"] == STATELESS and stateless["headers"]["mcp-name"] == "plain"
    assert stateless["body"]["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] == STATELESS


async def test_a_connection_the_server_closed_while_idle_is_opened_again() -> None:
    """A server that closes after each answer without saying so (as one whose keep-alive timeout ran out)."""
    connections = []

    async def answer_once(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(writer)
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.startswith(b"content-length"))
        request = json.loads(await reader.readexactly(length))
        body = json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": {"content": []}}).encode()
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(body))
        writer.write(body)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer_once, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server, WireClient(f"http://127.0.0.1:{port}/mcp", protocol=STATELESS) as client:
        for _ in range(3):
            assert await client.call_tool("t", {}) == {"content": []}
            await asyncio.sleep(0.05)  # the close reaches the idle connection
    assert len(connections) == 3
