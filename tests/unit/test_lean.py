"""The lean path's slow answer (gateway/http/lean.py): the event stream it switches to opens as the SDK's does,
whenever the read ends relative to the task that pings."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from gateway.http.lean import _SlowAnswer

pytestmark = pytest.mark.anyio


def _recorder() -> tuple[list[Any], Any]:
    sent: list[Any] = []

    async def send(message: Any) -> None:
        sent.append(message.get("body", message["type"]))

    return sent, send


async def test_a_read_that_ends_before_the_pinging_task_runs_still_opens_with_headers_and_a_ping() -> None:
    sent, send = _recorder()
    stream = _SlowAnswer(send)
    stream.open()  # the window ended ...
    await stream.stop()  # ... and the read ended before the pinging task ran
    await stream.finish(b"event: message\r\ndata: {}\r\n\r\n")
    assert sent == ["http.response.start", b": ping\r\n\r\n", b"event: message\r\ndata: {}\r\n\r\n"]


async def test_a_read_that_ends_after_the_first_ping_gets_no_second_one() -> None:
    sent, send = _recorder()
    stream = _SlowAnswer(send)
    stream.open()
    await anyio.sleep(0.01)  # the pinging task sends its headers and first ping, then waits out the window
    await stream.stop()
    await stream.finish(b"last")
    assert sent == ["http.response.start", b": ping\r\n\r\n", b"last"]
