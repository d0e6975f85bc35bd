"""A lean MCP client over streamable HTTP, on one keep-alive connection: 2025-11-25 (initialize, then calls in the
session) or 2026-07-28 (no handshake: every request carries its envelope in ``_meta`` and the routing headers).

The load generator uses it instead of the SDK client so that every server under test is driven by the same,
cheap client: the SDK client re-validates ``structuredContent`` against the tool's outputSchema (the gateway
declares one, the raw backend does not), which would bill client work to the gateway. It speaks the real wire
protocol: the handshake, the session header, JSON or SSE answers.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import httpx

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
        self._http = httpx.AsyncClient(
            timeout=timeout, limits=httpx.Limits(max_connections=1, max_keepalive_connections=1)
        )
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
                await self._http.delete(self.url, headers=self._headers)
        except httpx.HTTPError:
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

    async def _post(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> httpx.Response:
        response = await self._http.post(self.url, content=json.dumps(body), headers=headers or self._headers)
        if response.status_code >= 400:
            raise WireError(f"HTTP {response.status_code}: {response.text[:200]}")
        return response


def _messages(response: httpx.Response) -> list[dict[str, Any]]:
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
