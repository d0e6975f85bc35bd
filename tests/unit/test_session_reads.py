"""What a 2025 session keeps for its lean path (gateway/http/session_reads.py): the version its initialize's answer
gave, and which of its calls a cancel or the session's end interrupts."""

from __future__ import annotations

import anyio
import mcp_types as types
import pytest

from gateway.http.session_reads import ReadingSession, _Running


def answered(result: dict[str, object]) -> types.JSONRPCResponse:
    return types.JSONRPCResponse(jsonrpc="2.0", id=1, result=result)


def test_the_version_is_the_one_an_initialize_result_gave_and_an_error_changes_nothing() -> None:
    session = ReadingSession()
    session.initialized(types.JSONRPCError(jsonrpc="2.0", id=1, error=types.ErrorData(code=-32602, message="no")))
    session.initialized(None)
    assert session.version is None
    session.initialized(answered({"protocolVersion": "2025-06-18"}))
    session.initialized(answered({"protocolVersion": 20250618}))  # not a version: ignored
    assert session.version == "2025-06-18"
    session.initialized(answered({"protocolVersion": "2025-11-25"}))  # initialize again: the SDK commits it too
    assert session.version == "2025-11-25"


def cancel(request_id: object) -> dict[str, object]:
    return {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": request_id}}


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("message", "hit"),
    [
        (cancel(9), True),
        (cancel("9"), True),  # a stringified id correlates, as the SDK's dispatcher coerces it
        (cancel(True), False),  # a bool is not an id (True would alias 1)
        (cancel(8), False),
        ({"jsonrpc": "2.0", "method": "notifications/cancelled"}, False),
        ({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"requestId": 9}}, False),
        (None, False),
    ],
)
async def test_a_cancel_interrupts_only_the_call_it_names(message: object, hit: bool) -> None:
    session = ReadingSession()
    call = session.running[9] = _Running(anyio.CancelScope())
    session.cancelled(message)
    assert (call.cancelled, call.scope.cancel_called) == (hit, hit)


@pytest.mark.anyio
async def test_the_sessions_end_interrupts_every_call_without_calling_it_cancelled() -> None:
    session = ReadingSession()
    calls = [_Running(anyio.CancelScope()) for _ in range(2)]
    session.running.update(enumerate(calls))
    session.ended()
    assert all(call.scope.cancel_called and not call.cancelled for call in calls)
