"""The pure parts of per-request answer modes: which requests get a stream, and the bounded event store that
lets a dropped write stream resume (gateway/http/answer_modes.py; over real HTTP:
tests/system/test_http_sessions.py)."""

from __future__ import annotations

from typing import Any

import pytest
from mcp_types import JSONRPCNotification

from gateway.http.answer_modes import SessionEventStore, stream_for_tools

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("message", "needs_stream"),
    [
        ({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "reset_tenant"}}, True),
        ({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}, False),
        ({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, False),
        ({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "list_tenants"}}, False),
        ({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "no_such_tool"}}, False),
        ({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": ["reset_tenant"]}, False),
        ({"jsonrpc": "2.0", "id": 1, "method": "tools/call"}, False),
        ([{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "reset_tenant"}}], False),
        (None, False),
    ],
)
def test_only_a_write_tool_call_needs_a_stream(message: Any, needs_stream: bool) -> None:
    assert stream_for_tools(["reset_tenant"], lambda tool: True)(message) is needs_stream


def test_a_write_tool_hidden_from_the_caller_gets_no_stream_like_an_unknown_one() -> None:
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "reset_tenant"}}
    assert stream_for_tools(["reset_tenant"], lambda tool: tool != "reset_tenant")(call) is False


async def test_the_event_store_keeps_only_streamed_requests_and_is_bounded() -> None:
    store = SessionEventStore(max_events=3)
    note = JSONRPCNotification(jsonrpc="2.0", method="notifications/progress")
    await store.store_event("7", note)  # a request answered with JSON: not kept
    store.streams("8")
    first = await store.store_event("8", None)
    await store.store_event("8", note)
    sent: list[Any] = []

    async def send(message: Any) -> None:
        sent.append(message)

    assert await store.replay_events_after(first, send) == "8"
    assert len(sent) == 1
    assert await store.replay_events_after("1", send) is None  # the JSON-answered request's event was not kept
    for _ in range(3):
        await store.store_event("8", note)
    assert await store.replay_events_after(first, send) is None  # the oldest event went first
