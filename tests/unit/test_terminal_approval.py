"""What the terminal client shows for a write that waits on the approval page: the question and the link escaped,
a countdown to when the gateway stops waiting, and after Ctrl-C what state the write is in."""

from __future__ import annotations

import time

import mcp_types as types
import pytest

from gateway.approvals.lifecycle import WAIT_META
from gateway.cli.call.approval import ApprovalWait
from gateway.text import rfc3339
from gateway.write.progress import ASKING, CALLING

HOSTILE_URL = "https://gw.example.com/approvals/ap_x\x1b[2K\u202eevil"


def link(meta: dict[str, object] | None = None, url: str = HOSTILE_URL) -> types.ElicitRequestURLParams:
    return types.ElicitRequestURLParams(
        message='Delete 812 rows in "tn\x1b]0;pwned\x07"?\nsecond line', url=url, elicitation_id="ap_x", _meta=meta
    )


def test_the_question_and_the_link_are_shown_escaped(capsys: pytest.CaptureFixture[str]) -> None:
    ApprovalWait().show(link({WAIT_META: {"expiresAt": "2026-12-04T18:00:00Z"}}))
    shown = capsys.readouterr().out
    assert "\x1b" not in shown and "\u202e" not in shown and "\x07" not in shown
    assert "ap_x\\u001b[2K\\u202eevil" in shown and "tn\\u001b]0;pwned\\u0007" in shown
    assert "second line" in shown and "the approval expires at 2026-12-04T18:00:00Z" in shown


def test_the_countdown_runs_to_when_the_gateway_stops_waiting() -> None:
    now = time.time()
    wait = ApprovalWait()
    wait.show(link({WAIT_META: {"waitsUntil": rfc3339(now + 125)}}))
    assert wait.status(now).removeprefix("waiting for approval: ") in (
        "2:05 left (Ctrl-C stops waiting)",
        "2:04 left (Ctrl-C stops waiting)",
    )
    assert "0:00 left" in wait.status(now + 200)
    without = ApprovalWait()
    without.show(link())  # another gateway, no wait in the link: the time waited so far
    assert without.status(now).startswith("waiting for approval: 0:00 so far")


def test_after_ctrl_c_it_says_whether_the_write_could_have_been_sent() -> None:
    wait = ApprovalWait()
    wait.show(link({WAIT_META: {"expiresAt": "2026-12-04T18:00:00Z"}}, url="https://gw.example.com/approvals/ap_x"))
    wait.progress(ASKING)
    waiting = " ".join(wait.stopped())
    assert "nothing was written" in waiting and "https://gw.example.com/approvals/ap_x" in waiting
    assert "until 2026-12-04T18:00:00Z" in waiting and "same command again" in waiting
    wait.progress(CALLING)
    sending = " ".join(wait.stopped())
    assert "being sent" in sending and "nothing was written" not in sending and "never writes twice" in sending
