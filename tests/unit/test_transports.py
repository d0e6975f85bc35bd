"""The backend transports' caps: which request an oversized stdio line answers, and an HTTP body cut off at the cap
becoming a JSON-RPC error for its request (httpx2's in-memory MockTransport stands in for the network). The stdio
reader itself is tests/unit/test_stdio.py's."""

from __future__ import annotations

import json

import httpx2
import pytest

from gateway.backend.transports import RESULT_TOO_LARGE, CappedTransport, answered_id, names_a_method

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("prefix", "waiting", "answers"),
    [
        (b'{"jsonrpc":"2.0","id":7,"result":{"content":[{"text":"xxxx', {3: None, 7: None}, 7),
        (b'{ "id" : "a-1", "jsonrpc": "2.0", "result": {', {"a-1": None, 2: None}, "a-1"),
        (b'{"result":{"content":[{"text":"xxxx', {5: None}, 5),  # no id in sight, one request waiting
        (b'{"result":{"content":[{"text":"xxxx', {5: None, 6: None}, None),  # which one? cannot be told
        (b'{"jsonrpc":"2.0","id":9,"result":', {5: None, 6: None}, None),  # names a request nobody waits for
    ],
)
def test_an_oversized_line_answers_the_request_it_names_or_the_only_one_waiting(
    prefix: bytes, waiting: dict[int | str, None], answers: int | str | None
) -> None:
    assert answered_id(prefix, waiting) == answers


def test_an_oversized_notification_answers_nothing() -> None:
    assert names_a_method(b'{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"xxx')
    assert not names_a_method(b'{"jsonrpc":"2.0","id":1,"result":{}}')


def _backend(body: bytes, content_type: str = "application/json") -> httpx2.MockTransport:
    return httpx2.MockTransport(
        lambda request: httpx2.Response(200, content=body, headers={"content-type": content_type})
    )


async def _post(transport: httpx2.AsyncBaseTransport, message: dict[str, object]) -> httpx2.Response:
    async with httpx2.AsyncClient(transport=transport) as client:
        return await client.post("http://backend.test/mcp", json=message)


async def test_a_json_body_past_the_cap_becomes_a_too_large_error_for_its_request() -> None:
    huge = json.dumps({"jsonrpc": "2.0", "id": 4, "result": {"padding": "x" * 5000}}).encode()
    answer = await _post(CappedTransport(_backend(huge), 1000), {"jsonrpc": "2.0", "id": 4, "method": "tools/call"})
    assert answer.json()["id"] == 4 and answer.json()["error"]["code"] == RESULT_TOO_LARGE


async def test_a_body_within_the_cap_and_a_stream_pass_through_unchanged() -> None:
    small = json.dumps({"jsonrpc": "2.0", "id": 4, "result": {}}).encode()
    within = await _post(CappedTransport(_backend(small), 1000), {"jsonrpc": "2.0", "id": 4, "method": "ping"})
    stream = b"event: message\ndata: " + b"x" * 5000 + b"\n\n"
    sse = await _post(CappedTransport(_backend(stream, "text/event-stream"), 1000), {"id": 5})
    assert within.content == small
    assert sse.content == stream  # SSE events are capped by the SDK's own max_sse_event_size


async def test_a_notification_past_the_cap_is_accepted_and_dropped() -> None:
    huge = b'{"padding": "' + b"x" * 5000 + b'"}'
    answer = await _post(CappedTransport(_backend(huge), 1000), {"jsonrpc": "2.0", "method": "notifications/x"})
    assert answer.status_code == 202 and answer.content == b""
