"""Real SDK clients on a gateway in this process, prompt answers, and reading results."""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from gateway.backend.client import Opener
from gateway.config import GatewayConfig
from gateway.mcp.server import build_server
from gateway.runtime import Gateway, open_gateway
from tests.support.inprocess import in_process
from tests.support.profiles import Profile

ERAS = ["2025-11-25", "2026-07-28"]
YES = {"confirm": True}

# Raw streamable-HTTP messages, for tests that look at statuses and headers rather than through an SDK client.
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
POST_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "raw-test", "version": "0"},
}
"""What a raw 2026-07-28 request carries in ``params._meta`` (a stateless request states its client each time)."""


class Clock:
    """A settable clock for plan expiry, and a sleep on it that passes at once (an approval's wait)."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset

    async def sleep(self, seconds: float) -> None:
        """Move the clock on by ``seconds`` and let other tasks run, instead of waiting."""
        self.offset += seconds
        await anyio.lowlevel.checkpoint()


@asynccontextmanager
async def running_gateway(
    config: GatewayConfig, clock: Clock | None = None, *, backend_in_process: bool = False, opener: Opener | None = None
) -> AsyncIterator[Gateway]:
    """A gateway over the config's backends, connected before it is yielded (so tests can read their databases).
    Its time is ``clock``: a call waiting for an approval moves it on instead of sleeping.

    ``backend_in_process`` runs the config's backend servers in this process (the unit tier)."""
    openers = in_process(config) if backend_in_process else None
    clock = clock or Clock()
    async with open_gateway(config, clock=clock, sleep=clock.sleep, opener=opener, openers=openers) as gw:
        with anyio.fail_after(60):
            await gw.settle()
        yield gw


class Answers:
    """An elicitation callback that answers from a script and records every prompt."""

    def __init__(self, action: str = "accept", content: dict[str, Any] | None = None) -> None:
        self.action = action
        self.content = dict(YES) if content is None else content
        self.prompts: list[types.ElicitRequestParams] = []

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.prompts.append(params)
        if self.action == "accept":
            return types.ElicitResult(action="accept", content=self.content)
        return types.ElicitResult(action=self.action)

    @property
    def messages(self) -> list[str]:
        """The question of every prompt so far: a form's message without the facts' digest it ends with."""
        return [question_of(prompt.message) for prompt in self.prompts]


FACTS_DIGEST = re.compile(r" \(facts digest (?:[0-9a-f]{4} ){3}[0-9a-f]{4}\)$")
"""How a form's question ends: the short form of the digest of the facts it asks about (gateway.approvals.digest)."""


def question_of(message: str) -> str:
    """A prompt's question without the digest a form ends with (a url elicitation's message has none)."""
    return FACTS_DIGEST.sub("", message)


def without_digest(extra: dict[str, Any]) -> dict[str, Any]:
    """An audit entry's ``extra`` without its ``factsDigest`` (a SHA-256, checked to be one)."""
    digest = extra.get("factsDigest")
    assert digest is None or re.fullmatch(r"[0-9a-f]{64}", digest), digest
    return {name: value for name, value in extra.items() if name != "factsDigest"}


NOT_A_YES = [
    (Answers("decline"), "not_confirmed"),
    (Answers("cancel"), "not_confirmed"),
    (Answers("accept", {"confirm": False}), "not_confirmed"),
    (None, "confirmation_unavailable"),
]
"""Every answer but a yes (and a client that cannot be asked), with the code each gets."""
NOT_A_YES_IDS = ["decline", "cancel", "accept-without-yes", "no-capability"]


async def accept(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    """A user who says yes to every prompt (load generators and soaks)."""
    return types.ElicitResult(action="accept", content=dict(YES))


def connect(gw: Gateway, era: str, answers: Any = None) -> Client:
    """A real SDK client, in memory, speaking one protocol era; it can answer prompts when given answers."""
    mode = "legacy" if era == "2025-11-25" else "auto"
    return Client(build_server(gw), mode=mode, elicitation_callback=answers)


def http_client(era: str, url: str, answers: Any = None) -> Client:
    """A real SDK client over streamable HTTP speaking one era: 2025-11-25 on a stateful session (prompts pushed
    over SSE), 2026-07-28 stateless (InputRequiredResult rounds)."""
    if era == "2025-11-25":
        return Client(streamable_http_client(url), mode="legacy", elicitation_callback=answers or Answers())
    return Client(url, elicitation_callback=answers or Answers())


def error_code(result: types.CallToolResult) -> str:
    """The stable code of an isError result (which must carry no structuredContent)."""
    assert result.is_error, result
    assert result.structured_content is None
    return str(error_body(result)["code"])


def error_body(result: types.CallToolResult) -> dict[str, Any]:
    """The JSON body of an isError result."""
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return dict(json.loads(block.text))


async def until_reachable(call: Callable[[], Awaitable[types.CallToolResult]]) -> types.CallToolResult:
    """Retry what backend_unavailable says is safe to retry, as a client would, while the gateway backs off."""
    with anyio.fail_after(90):
        while True:
            result = await call()
            if not result.is_error or error_code(result) != "backend_unavailable":
                return result
            await anyio.sleep(0.2)


def new_key() -> str:
    """A fresh idempotency key."""
    return str(uuid.uuid4())


async def preview(client: Client, profile: Profile, target: str | None = None, variant: int = 0) -> dict[str, Any]:
    """A plan for ``target`` (the profile's main one by default)."""
    result = await client.call_tool(profile.preview_tool, profile.preview_args(target, variant))
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return dict(result.structured_content)


def applied_body(plan: dict[str, Any], version: int, replayed: bool = False) -> dict[str, Any]:
    """What a write reports for a plan: the plan's fields, the version after, and whether it replayed."""
    body = {name: value for name, value in plan.items() if name not in ("expiresAt", "approval")}
    return {**body, "version": version, "replayed": replayed}
