"""A command run at a real pseudo-terminal, answering its prompts as a person at the keyboard would.

The child gets the terminal as stdin, stdout and stderr and a session of its own (so ``/dev/tty`` is not the
test runner's terminal): ``isatty()`` is true, and ``getpass`` reads from it. Bounded in time; blocking, so async
tests run it in a worker thread.
"""

from __future__ import annotations

import os
import pty
import select
import subprocess
import time
from collections.abc import Mapping, Sequence

PROMPTS = (b"Approver token: ", b"[y/N] ")


def at_a_terminal(
    command: Sequence[str], env: Mapping[str, str], answers: Sequence[str], seconds: float = 60.0
) -> tuple[int, str]:
    """Run ``command`` at a pseudo-terminal, typing the next of ``answers`` at each prompt; (exit code, screen)."""
    leader, follower = pty.openpty()
    child = subprocess.Popen(
        list(command), stdin=follower, stdout=follower, stderr=follower, env=dict(env), start_new_session=True
    )
    os.close(follower)
    screen, typed, deadline = b"", 0, time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 0.2)
            if not ready:
                if child.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            screen += chunk
            while typed < min(len(answers), sum(screen.count(prompt) for prompt in PROMPTS)):
                os.write(leader, answers[typed].encode() + b"\n")
                typed += 1
        return child.wait(timeout=max(deadline - time.monotonic(), 1.0)), screen.decode(errors="replace")
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        os.close(leader)
