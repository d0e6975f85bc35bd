"""A write that waits for people on the approval page (``confirm = "url"``), as the terminal shows it.

The gateway sends the page's link as a url elicitation. The terminal prints the question and the link (escaped:
they came from the gateway), answers that it showed them, and the call then waits for the decision, with a
countdown on stderr to when the gateway stops waiting (``_meta["mcp-safety-gateway/approval"].waitsUntil``;
without it, the time waited so far). Nobody at the keyboard says yes or no here: the people on the page do.

Ctrl-C ends the wait: the call is cancelled (the SDK sends ``notifications/cancelled``, so the gateway stops
waiting too and will not write on this call), and the terminal says what state the write is in: not sent, still
waiting on the page until the approval expires (run the same command again once it is approved: it writes once);
or, if the gateway had reported that it was calling the backend, being sent (run the same command again to read
its outcome: a key never writes twice).
"""

from __future__ import annotations

import itertools
import signal
import sys
import time
from collections.abc import Awaitable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import anyio
import mcp_types as types

from gateway.approvals.lifecycle import WAIT_META
from gateway.cli.call.failures import printable
from gateway.write.progress import CALLING

TICK_SECONDS = 1.0
QUIET_TICKS = 30
"""Where stderr is not a terminal, the countdown is printed every this many ticks instead of redrawn."""


@dataclass
class ApprovalWait:
    """What the terminal knows about a write waiting on the approval page."""

    url: str | None = None
    expires_at: str | None = None
    waits_until: float | None = None
    started: float = field(default_factory=time.monotonic)
    sending: bool = False
    """The gateway reported it is calling the backend: the write may have been sent."""
    began: anyio.Event = field(default_factory=anyio.Event)

    def show(self, params: types.ElicitRequestURLParams) -> None:
        """Print the question and the link, and start the wait."""
        wait = (params.meta or {}).get(WAIT_META)
        wait = wait if isinstance(wait, dict) else {}
        self.url, self.started = params.url, time.monotonic()
        self.expires_at = wait.get("expiresAt") if isinstance(wait.get("expiresAt"), str) else None
        self.waits_until = _timestamp(wait.get("waitsUntil"))
        lines = [*(printable(line) for line in str(params.message).split("\n")), "", "Approve it on the page:"]
        lines.append(f"  {printable(params.url)}")
        if self.expires_at is not None:
            lines.append(f"(the approval expires at {printable(self.expires_at)})")
        if isinstance(wait.get("digest"), str):  # the page shows the same: what is approved is what runs
            lines.append(f"(facts digest {printable(wait['digest'])}: the page shows the same)")
        print("\n" + "\n".join(lines), flush=True)
        self.began.set()

    def progress(self, message: str | None) -> None:
        """Note a progress message: from "calling the backend" on, the write may have been sent."""
        self.sending = self.sending or message == CALLING

    def status(self, now: float) -> str:
        """The countdown line: how long the gateway still waits for the decision."""
        if self.waits_until is None:
            return f"waiting for approval: {_clock(time.monotonic() - self.started)} so far (Ctrl-C stops waiting)"
        return f"waiting for approval: {_clock(max(0.0, self.waits_until - now))} left (Ctrl-C stops waiting)"

    def stopped(self) -> list[str]:
        """What the person is told when Ctrl-C ended the wait."""
        if self.sending:
            return [
                "stopped waiting while the write was being sent to the backend: it may have run",
                "run the same command again (same planId and idempotencyKey) to read its outcome: it never writes"
                " twice",
            ]
        until = f" until {printable(self.expires_at)}" if self.expires_at else ""
        return [
            f"stopped waiting; nothing was written: the write still waits for approval at {printable(self.url or '')}"
            f"{until}",
            "once it is approved, run the same command again (same planId and idempotencyKey): it then runs, once",
        ]

    async def watch(self, stop: anyio.CancelScope) -> None:
        """Once the link was shown: redraw the countdown every second; Ctrl-C cancels the call."""
        await self.began.wait()
        live = sys.stderr.isatty()
        with anyio.open_signal_receiver(signal.SIGINT) as interrupts:
            try:
                for tick in itertools.count():
                    if live or tick % QUIET_TICKS == 0:  # a log, not a terminal: a line now and then
                        _draw(self.status(time.time()), live)
                    with anyio.move_on_after(TICK_SECONDS):
                        async for _ in interrupts:
                            stop.cancel()
                            return
            finally:
                _draw("", live, done=True)


async def until_decided(call: Awaitable[Any], wait: ApprovalWait) -> tuple[bool, Any]:
    """Run the call, counting down while it waits on the approval page: (True, its result), or (False, None)
    when Ctrl-C ended the wait."""
    outcome: list[Any] = []
    async with anyio.create_task_group() as tasks:

        async def calling() -> None:
            outcome.append(await call)
            tasks.cancel_scope.cancel()

        tasks.start_soon(calling)
        tasks.start_soon(wait.watch, tasks.cancel_scope)
    return (True, outcome[0]) if outcome else (False, None)


def _draw(line: str, live: bool, done: bool = False) -> None:
    if live:  # one line, redrawn in place (cleared when done)
        print("\r\x1b[2K" + line, end="", file=sys.stderr, flush=True)
    elif line and not done:
        print(line, file=sys.stderr, flush=True)


def _clock(seconds: float) -> str:
    whole = int(seconds)
    return f"{whole // 60}:{whole % 60:02d}"


def _timestamp(text: Any) -> float | None:
    if not isinstance(text, str):
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
