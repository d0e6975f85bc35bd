"""The supervisor of ``serve --workers N`` (gateway/cli/workers.py) with real forks, in a child interpreter so that
no test process forks: a worker that raises is logged with its reason, SIGTERM then ends the supervisor with status
0, and its metrics directory is gone afterwards; a worker that dies at every start is replaced ever more slowly, a
stop does not wait for the pause, and one slot's pause delays no other slot's replacement."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from gateway.cli.workers import LONGEST_PAUSE, RESTART_PAUSE, restart_pause

SUPERVISED = """
import logging, sys
from gateway.cli.workers import supervise
logging.basicConfig(level=logging.INFO, stream=sys.stderr)

def worker() -> int:
    raise RuntimeError("the worker could not start: boom")

sys.exit(supervise(1, worker))
"""
DIES_AT_ONCE = SUPERVISED.replace('raise RuntimeError("the worker could not start: boom")', "return 3")


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


def test_the_pause_before_a_replacement_doubles_with_each_quick_death_up_to_a_minute() -> None:
    assert [restart_pause(deaths) for deaths in range(1, 9)] == [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0]
    assert restart_pause(1) == RESTART_PAUSE and restart_pause(100) == LONGEST_PAUSE


def supervised_dying(tmp_path: Path, first_pause: float) -> tuple[subprocess.Popen[bytes], Path]:
    """A supervisor (in a child interpreter) of one worker that exits at once, its first pause ``first_pause``."""
    log = tmp_path / "stderr.log"
    script = DIES_AT_ONCE.replace(
        "def worker", f"import gateway.cli.workers\ngateway.cli.workers.RESTART_PAUSE = {first_pause}\ndef worker"
    )
    with log.open("w") as stderr:
        return subprocess.Popen([sys.executable, "-c", script], stderr=stderr), log


def said_when(log: Path, words: str) -> str:
    deadline = time.monotonic() + 30
    while words not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.02)
    return log.read_text()


def test_a_worker_that_dies_at_every_start_is_replaced_ever_more_slowly(tmp_path: Path) -> None:
    child, log = supervised_dying(tmp_path, 0.05)
    try:
        said = said_when(log, "starting another in 0.4 s")
    finally:
        child.send_signal(signal.SIGTERM)
        assert child.wait(timeout=30) == 0, log.read_text()
    pauses = [line.rsplit("starting another in ", 1)[1] for line in said.splitlines() if "starting another" in line]
    assert pauses == ["0.05 s", "0.1 s", "0.2 s", "0.4 s"], said
    assert said.count("started (pid") == 4 and "ended (exit 3)" in said


def test_a_stop_does_not_wait_for_the_pause_before_a_replacement(tmp_path: Path) -> None:
    child, log = supervised_dying(tmp_path, 30.0)
    said_when(log, "starting another in 30 s")
    asked = time.monotonic()
    child.send_signal(signal.SIGTERM)
    assert child.wait(timeout=30) == 0, log.read_text()
    assert time.monotonic() - asked < 10  # not the 30 s of the pause
    assert log.read_text().count("started (pid") == 1


TWO_WORKERS = """
import logging, os, sys, time
import gateway.cli.workers as workers
workers.RESTART_PAUSE = 0.05
logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(created)f %(message)s")

def worker() -> int:
    try:  # the first worker to start holds on for 2 s, then says when it ended; every other one dies at once
        held = os.open(sys.argv[1], os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return 3
    time.sleep(2.0)
    os.write(held, repr(time.time()).encode())
    return 0

sys.exit(workers.supervise(2, worker))
"""


def test_a_worker_waiting_for_its_replacement_delays_no_other_slots_replacement(tmp_path: Path) -> None:
    """While one slot's replacement waits out a long pause (1.6 s by then), the other slot's worker ends and is
    replaced after its own first pause (0.05 s), not after the first slot's."""
    held, log = tmp_path / "held", tmp_path / "stderr.log"
    with log.open("w") as stderr:
        child = subprocess.Popen([sys.executable, "-c", TWO_WORKERS, str(held)], stderr=stderr)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (held.exists() and held.read_text() and "exit 0" in log.read_text()):
            time.sleep(0.05)
        time.sleep(1.0)  # the held slot's replacement, if it comes soon
    finally:
        child.send_signal(signal.SIGTERM)
        assert child.wait(timeout=30) == 0, log.read_text()
    ended_at = float(held.read_text())
    lines = [line.split(" ", 1) for line in log.read_text().splitlines() if line[:1].isdigit()]
    slot = next(said.split()[1] for _, said in lines if "ended (exit 0)" in said)
    starts = [float(when) for when, said in lines if said.startswith(f"worker {slot} started")]
    assert any(0 < start - ended_at < 0.8 for start in starts), log.read_text()


STOPPED_WHILE_FORKING = """
import os, signal, sys, time
import gateway.cli.workers as workers

forked = os.fork

def fork() -> int:  # the stop arrives just as a worker is born, before the supervisor has noted it
    pid = forked()
    if pid:
        os.kill(os.getpid(), signal.SIGTERM)
    return pid

os.fork = fork

def worker() -> int:
    time.sleep(60)
    return 0

sys.exit(workers.supervise(1, worker))
"""


def test_a_stop_that_comes_while_a_worker_is_forked_still_reaches_it(tmp_path: Path) -> None:
    child = subprocess.Popen([sys.executable, "-c", STOPPED_WHILE_FORKING], start_new_session=True)
    try:
        assert child.wait(timeout=20) == 0  # before the fix: the worker never heard of the stop, and both waited
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)  # the worker too, if it was left running
