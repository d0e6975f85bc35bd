"""What the terminal client (and ``inspect``) says when a call cannot be made: one or two sentences and what to
do, never a traceback. The SDK reports these as exception groups of transport errors (``httpx2``) or JSON-RPC errors
(``MCPError``); the HTTP status of the last answer, recorded by the client, tells a 401 from a wrong URL."""

from __future__ import annotations

import difflib
from collections.abc import Iterator

import httpx2
from mcp.shared.exceptions import MCPError

from gateway.text import escaped

METHOD_NOT_FOUND = -32601
SHOWN = 4096
"""The longest text from the gateway shown whole (longer is cut with an ellipsis)."""


class LastStatus:
    """Records the HTTP status of a server's last answer: the SDK reports a 401 or a 404 like any other failure."""

    def __init__(self) -> None:
        self.status: int | None = None

    async def __call__(self, response: httpx2.Response) -> None:
        self.status = response.status_code


def printable(text: str) -> str:
    """Text from the gateway as the terminal shows it: control, bidi and format characters spelled out."""
    return escaped(text, SHOWN)


def explain(exc: BaseException, url: str, token_env: str, token_sent: bool, status: int | None) -> list[str]:
    """The sentences for a call that failed before a tool answered."""
    leaf = leaf_of(exc)
    where = printable(url)
    if status == 401:
        if token_sent:
            return [f"the gateway refused the token in ${token_env} (HTTP 401): it is wrong or expired; get a new one"]
        return [f"the gateway wants a bearer token (HTTP 401): set it with  export {token_env}=<token>"]
    if status == 403:
        return [f"the token in ${token_env} lacks a scope this gateway requires (HTTP 403)"]
    if status == 404 or (isinstance(leaf, MCPError) and leaf.code == METHOD_NOT_FOUND):
        return [f"nothing answers MCP at {where} (HTTP 404)", "the gateway's endpoint ends in /mcp: check --url"]
    if status is not None and status >= 400:
        return [f"{where} answered HTTP {status}, not MCP: check --url"]
    if isinstance(leaf, httpx2.TimeoutException):
        return [f"the gateway at {where} did not answer in time", "check that it is healthy: GET /healthz and /readyz"]
    if isinstance(leaf, httpx2.ConnectError | ConnectionError):
        return [
            f"cannot reach a gateway at {where}",
            "is it running? start one with: mcp-safety-gateway serve (or pass --url)",
        ]
    if isinstance(leaf, httpx2.HTTPError):
        return [f"cannot talk to the gateway at {where}: {type(leaf).__name__}", "check --url"]
    if isinstance(leaf, MCPError):
        return [f"protocol error {leaf.code}: {printable(leaf.message)}"]
    return [f"the call failed: {type(leaf).__name__}", "check the gateway's log (stderr) for this time"]


def unknown_tool(name: str, names: list[str]) -> list[str]:
    """Unknown (or hidden from this caller: the gateway answers both alike) and what the tools are."""
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.75)
    first = f"unknown tool {printable(name)!r}" + (f", did you mean {printable(close[0])}?" if close else "")
    listed = ", ".join(printable(item) for item in names) or "none visible to this caller"
    return [first, f"tools: {listed} (a tool your token may not use is not shown)"]


def leaf_of(exc: BaseException) -> BaseException:
    """The one error that says what happened, from an exception group (protocol errors before transport ones)."""
    leaves = list(_leaves(exc))
    for kind in (MCPError, httpx2.HTTPError, OSError):
        for leaf in leaves:
            if isinstance(leaf, kind):
                return leaf
    return leaves[0] if leaves else exc


def _leaves(exc: BaseException) -> Iterator[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _leaves(inner)
    else:
        yield exc
