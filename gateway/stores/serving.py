"""One serving process per store file: an exclusive ``flock`` on ``<store>.serving`` beside it.

The SQLite store's per-target locks and its start-up recovery assume that one process serves the file: a second
``serve`` would settle the first one's in-flight keys as unknown and let two writes planned at one version both
apply. So ``serve`` takes this lock before recovery and keeps it until it exits. The kernel drops it when the
process dies however it dies (SIGKILL included), so a crash never leaves the store locked, and the next
``serve`` recovers what the dead one left in flight. The holder writes a one-line description of itself into
the file so the refusal can name it. ``check`` and ``audit`` do not take it: they read, or (``audit trim``) write
in a SQLite transaction of their own.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from gateway.errors import StoreInUse


class ServingLock:
    """The exclusive right to serve one store file, held until ``release`` or the process ends."""

    def __init__(self, store_file: Path) -> None:
        self.store_file = store_file
        self.path = store_file.with_name(store_file.name + ".serving")
        self._fd: int | None = None

    def acquire(self, holder: str) -> None:
        """Take the lock and describe this process in it, or raise StoreInUse naming the process that holds it."""
        if self._fd is not None:
            return
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)  # not inherited by children (PEP 446)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            other = os.pread(fd, 4096, 0).decode(errors="replace").strip() or "another process"
            os.close(fd)
            raise StoreInUse(
                f"the store {self.store_file} is already served by {other}; one process serves a "
                "SQLite store: stop that one, point this one at its own gateway.store, or share a Redis store "
                "between them"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, holder.encode(), 0)
        self._fd = fd

    def release(self) -> None:
        """Let another process serve the store (closing the descriptor drops the lock)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
