"""``serve --workers N``: N gateway processes answering on one port, under a supervisor that owns the socket.

The supervisor binds the socket (gateway/http/sockets.py), then forks N workers before any event loop starts;
each runs the ordinary HTTP ``serve`` on the inherited socket, and the kernel hands each new connection to one of
them. A worker that dies is replaced (at most once a second, so a worker that cannot start does not spin). On
SIGTERM or SIGINT the supervisor passes SIGTERM to every worker, each finishes its open requests (a confirmed
write in flight settles) and closes its store, and the supervisor returns once all have exited.

Only a store several processes can share may have more than one worker: Redis and PostgreSQL. ``memory`` is one
process's own, and SQLite is held by one ``serve`` at a time (gateway/stores/serving.py).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from collections.abc import Callable

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
    alive: dict[int, int] = {}
    stopping = False

    def start(slot: int) -> None:
        pid = os.fork()
        if pid == 0:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            code = 1
            try:
                code = run_worker()
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
