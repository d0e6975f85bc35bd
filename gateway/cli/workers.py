"""``serve --workers N``: N gateway processes answering on one port, under a supervisor that owns the socket.

The supervisor binds the port (gateway/http/sockets.py), then forks N workers before any event loop starts; each
runs the ordinary HTTP ``serve`` on a socket of its own bound to the same port with SO_REUSEPORT, and the kernel
spreads new connections evenly over the workers' sockets (on one shared socket, whichever worker woke first
accepted every connection waiting). The supervisor's own socket holds the port and never listens. A worker that
dies is replaced after a pause of a second, doubled for every death in a row soon after a start, up to a minute: a
worker that cannot start neither spins nor leaves a new set of metrics files (below) every second. While one
slot's replacement waits, the supervisor goes on reaping and replacing the others. One that fails logs why. On
SIGTERM or SIGINT the supervisor passes SIGTERM to every worker, each finishes its open requests (a confirmed
write in flight settles) and closes its store, and the supervisor returns once all have exited.

Metrics are one view: the supervisor makes a private directory (mode 0700, under ``$TMPDIR``) where every worker
keeps its values (gateway/observability/metrics.py), so a scrape of the shared port, whichever worker takes it,
reports all of them. A worker that dies has its live gauges removed from that view, its counters kept; the
directory is removed when the supervisor returns.

Only a store several processes can share may have more than one worker: Redis and PostgreSQL. ``memory`` is one
process's own, and SQLite is held by one ``serve`` at a time (gateway/stores/serving.py).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Callable

from prometheus_client.multiprocess import mark_process_dead

from gateway.observability.metrics import share_between_workers

log = logging.getLogger("gateway")

RESTART_PAUSE = 1.0
"""Seconds before a dead worker is replaced; doubled for each death in a row that came soon after its start."""
LONGEST_PAUSE = 60.0
"""The most a dead worker's replacement waits (a worker that cannot start is tried once a minute)."""
STOPS = {signal.SIGTERM, signal.SIGINT}
"""The signals that stop the supervisor and, through it, every worker."""
POLL_SECONDS = 0.1
"""How often the supervisor looks for ended workers while a replacement waits for its time."""
STEADY_SECONDS = 60.0
"""A worker that lived this long died of something else than its start: its replacement waits RESTART_PAUSE."""


def workers_refusal(store: str, workers: int) -> str | None:
    """Why this store cannot have ``workers`` processes, or None."""
    if workers < 1:
        return f"--workers {workers}: give 1 or more"
    if workers == 1 or store.startswith(("redis://", "rediss://", "postgres://", "postgresql://")):
        return None
    if store == "memory":
        why = "the memory store lives in one process, so each worker would keep its own plans and idempotency keys"
    else:
        why = "a SQLite store is held by one serve process at a time, so a second worker could not open it"
    return f"--workers {workers} needs a store that several processes share (redis:// or postgresql://): {why}"


def supervise(workers: int, run_worker: Callable[[], int]) -> int:
    """Fork ``workers`` processes that each call ``run_worker``, replace any that dies, and stop them all on
    SIGTERM or SIGINT. Returns 0 once every worker has exited after a stop."""
    shared = tempfile.mkdtemp(prefix="mcp-safety-gateway-metrics-")
    try:
        return _supervise(workers, run_worker, shared)
    finally:
        shutil.rmtree(shared, ignore_errors=True)


def restart_pause(quick_deaths: int) -> float:
    """Seconds before a worker's replacement starts, after ``quick_deaths`` deaths in a row soon after a start."""
    return min(LONGEST_PAUSE, RESTART_PAUSE * 2.0 ** max(0, quick_deaths - 1))


def _supervise(workers: int, run_worker: Callable[[], int], shared: str) -> int:
    alive: dict[int, int] = {}
    started_at: dict[int, float] = {}
    quick_deaths: dict[int, int] = {}
    stopping = False

    def start(slot: int) -> None:
        # A stop held back until the worker is noted (so the stop reaches it) and its own handlers are the defaults.
        held = signal.pthread_sigmask(signal.SIG_BLOCK, STOPS)
        try:
            pid = os.fork()
            if pid == 0:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                signal.signal(signal.SIGINT, signal.SIG_DFL)
                signal.pthread_sigmask(signal.SIG_SETMASK, held)
                code = 1
                try:
                    share_between_workers(shared)
                    code = run_worker()
                except Exception:  # os._exit below would end the worker before Python printed why
                    log.exception("worker %d (pid %d) failed", slot, os.getpid())
                finally:
                    os._exit(code)
            alive[pid] = slot
            started_at[slot] = time.monotonic()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)
        log.info("worker %d started (pid %d)", slot, pid)

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True
        for pid in list(alive):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    for slot in range(workers):
        start(slot)
    due: dict[int, float] = {}  # slot -> when its replacement starts; the others are served meanwhile
    while alive or (due and not stopping):
        for slot, when in list(due.items()):
            if not stopping and when <= time.monotonic():
                del due[slot]
                start(slot)
        pid, status = _reaped(wait=not due or stopping)
        if pid == 0:
            time.sleep(POLL_SECONDS)  # a replacement is due later (or a stop came): look again soon
            continue
        slot = alive.pop(pid, -1)
        if slot < 0:
            continue
        mark_process_dead(pid, shared)  # type: ignore[no-untyped-call]
        if stopping:
            log.info("worker %d (pid %d) stopped", slot, pid)
            continue
        lived = time.monotonic() - started_at[slot]
        quick_deaths[slot] = quick_deaths.get(slot, 0) + 1 if lived < STEADY_SECONDS else 1
        pause = restart_pause(quick_deaths[slot])
        log.warning("worker %d (pid %d) ended (%s); starting another in %g s", slot, pid, _how(status), pause)
        due[slot] = time.monotonic() + pause
    return 0


def _reaped(*, wait: bool) -> tuple[int, int]:
    """A child that ended, as (pid, status); (0, 0) when none has (without ``wait``), was interrupted, or none is
    left."""
    try:
        return os.wait() if wait else os.waitpid(-1, os.WNOHANG)
    except (ChildProcessError, InterruptedError):
        return 0, 0


def _how(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"signal {os.WTERMSIG(status)}"
    return f"exit {os.waitstatus_to_exitcode(status)}"
