"""A command run at a real pseudo-terminal, answering its prompts as a person at the keyboard would.

The child gets the terminal as stdin, stdout and stderr and a session of its own (so ``/dev/tty`` is not the
test runner's terminal): ``isatty()`` is true, and ``getpass`` reads from it. Bounded in time; blocking, so async
tests run it in a worker thread. ``AtTerminal`` drives one step at a time (read until some text, type, press
Ctrl-C); ``at_a_terminal`` types the next answer at each prompt.
"""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence

PROMPTS = (b"Approver token: ", b"[y/N] ")


class AtTerminal:
    """A command running at a pseudo-terminal of its own."""

    def __init__(self, command: Sequence[str], env: Mapping[str, str]) -> None:
        self.leader, follower = pty.openpty()
        self.child = subprocess.Popen(
            list(command), stdin=follower, stdout=follower, stderr=follower, env=dict(env), start_new_session=True
        )
        os.close(follower)
        self.raw = b""

    @property
    def screen(self) -> str:
        """Everything the command wrote so far."""
        return self.raw.decode(errors="replace")

    def read(self, seconds: float) -> bool:
        """Read what the command writes within ``seconds``; False once it closed the terminal."""
        ready, _, _ = select.select([self.leader], [], [], seconds)
        if not ready:
            return self.child.poll() is None
        try:
            chunk = os.read(self.leader, 4096)
        except OSError:  # EIO: the child closed the terminal
            return False
        self.raw += chunk
        return bool(chunk)

    def read_until(self, text: str, seconds: float = 60.0) -> str:
        """Read until ``text`` is on the screen (AssertionError, with the screen, if it never comes)."""
        deadline = time.monotonic() + seconds
        while text not in self.screen:
            if time.monotonic() > deadline or not self.read(0.2):
                raise AssertionError(f"{text!r} never appeared; the screen shows:\n{self.screen}")
        return self.screen

    def type(self, text: str) -> None:
        os.write(self.leader, text.encode())

    def interrupt(self) -> None:
        """Ctrl-C: SIGINT to the command, as a terminal sends it to the job in the foreground."""
        self.child.send_signal(signal.SIGINT)

    def finish(self, seconds: float = 60.0) -> tuple[int, str]:
        """Read until the command exits: (its exit code, the screen)."""
        deadline = time.monotonic() + seconds
        try:
            while time.monotonic() < deadline and self.read(0.2):
                pass
            return self.child.wait(timeout=max(deadline - time.monotonic(), 1.0)), self.screen
        finally:
            if self.child.poll() is None:
                self.child.kill()
                self.child.wait()
            os.close(self.leader)


def at_a_terminal(
    command: Sequence[str], env: Mapping[str, str], answers: Sequence[str], seconds: float = 60.0
) -> tuple[int, str]:
    """Run ``command`` at a pseudo-terminal, typing the next of ``answers`` at each prompt; (exit code, screen)."""
    terminal, typed, deadline = AtTerminal(command, env), 0, time.monotonic() + seconds
    while time.monotonic() < deadline and terminal.read(0.2):
        while typed < min(len(answers), sum(terminal.raw.count(prompt) for prompt in PROMPTS)):
            terminal.type(answers[typed] + "\n")
            typed += 1
    return terminal.finish(max(deadline - time.monotonic(), 1.0))
