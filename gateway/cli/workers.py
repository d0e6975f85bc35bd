"""``serve --workers N``: N gateway processes answering on one port, under a supervisor that owns the socket.

The supervisor binds the port (gateway/http/sockets.py), then forks N workers before any event loop starts; each
runs the ordinary HTTP ``serve`` on a socket of its own bound to the same port with SO_REUSEPORT, and the kernel
spreads new connections evenly over the workers' sockets (on one shared socket, whichever worker woke first
accepted every connection waiting). The supervisor's own socket holds the port and never listens. A worker that
dies is replaced (at most once a second, so a worker that cannot start does not spin); one that fails logs why. On
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
"""Seconds between two replacements of a dead worker."""


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


def _supervise(workers: int, run_worker: Callable[[], int], shared: str) -> int:
    alive: dict[int, int] = {}
    stopping = False

    def start(slot: int) -> None:
        pid = os.fork()
        if pid == 0:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            code = 1
            try:
                share_between_workers(shared)
                code = run_worker()
            except Exception:  # os._exit below would end the worker before Python printed why
                log.exception("worker %d (pid %d) failed", slot, os.getpid())
            finally:
                os._exit(code)
        alive[pid] = slot
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
    while alive:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            break
        except InterruptedError:
            continue
        slot = alive.pop(pid, -1)
        if slot < 0:
            continue
        mark_process_dead(pid, shared)  # type: ignore[no-untyped-call]
        if stopping:
            log.info("worker %d (pid %d) stopped", slot, pid)
            continue
        log.warning("worker %d (pid %d) ended (%s); starting another", slot, pid, _how(status))
        time.sleep(RESTART_PAUSE)
        if not stopping:
            start(slot)
    return 0


def _how(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"signal {os.WTERMSIG(status)}"
    return f"exit {os.waitstatus_to_exitcode(status)}"
