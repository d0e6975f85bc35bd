"""The supervisor of ``serve --workers N`` (gateway/cli/workers.py) with real forks, in a child interpreter so that
no test process forks: a worker that raises is logged with its reason, SIGTERM then ends the supervisor with status
0, and its metrics directory is gone afterwards."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

SUPERVISED = """
import logging, sys
from gateway.cli.workers import supervise
logging.basicConfig(level=logging.INFO, stream=sys.stderr)

def worker() -> int:
    raise RuntimeError("the worker could not start: boom")

sys.exit(supervise(1, worker))
"""


def test_a_worker_that_raises_says_why_and_sigterm_still_ends_the_supervisor(tmp_path: Path) -> None:
    temporary, log = tmp_path / "tmp", tmp_path / "stderr.log"
    temporary.mkdir()
    env = {**os.environ, "TMPDIR": str(temporary)}
    with log.open("w") as stderr:
        child = subprocess.Popen([sys.executable, "-c", SUPERVISED], env=env, stderr=stderr)
    deadline = time.monotonic() + 20
    while "boom" not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    child.send_signal(signal.SIGTERM)
    assert child.wait(timeout=30) == 0, log.read_text()
    said = log.read_text()
    assert "RuntimeError: the worker could not start: boom" in said, said
    assert "worker 0 (pid" in said and ") failed" in said
    assert list(temporary.iterdir()) == []  # the metrics directory went with the supervisor
