"""A real redis-server on a loopback port, for the shared-store tests and benchmarks."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.processes import HOST

REDIS_MISSING = "redis-server is not installed: apt-get install redis-server (CI runs .ci/setup-redis.sh)"


class RedisMissing(Exception):
    """redis-server is not on PATH."""


@contextmanager
def redis_process(directory: Path, port: int, *, aof: bool = False) -> Iterator[subprocess.Popen[bytes]]:
    """A real redis-server on a loopback port, answering PING when yielded, killed (SIGKILL) afterwards.

    ``aof=True`` keeps an append-only file in ``directory``, fsynced on every write, so a restart on the same
    directory has every acknowledged write; otherwise nothing is persisted.
    """
    binary = shutil.which("redis-server")
    if binary is None:
        raise RedisMissing(REDIS_MISSING)
    directory.mkdir(parents=True, exist_ok=True)
    persistence = ["--appendonly", "yes", "--appendfsync", "always"] if aof else ["--appendonly", "no"]
    args = [binary, "--port", str(port), "--bind", HOST, "--dir", str(directory), "--save", "", *persistence]
    with (directory / "redis.log").open("ab") as log:
        child = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for_pong(port, child)
        yield child
    finally:
        child.kill()
        child.wait()


def wait_for_pong(port: int, child: subprocess.Popen[bytes], timeout: float = 20) -> None:
    """Until the server answers PING (it answers -LOADING while it replays its append-only file)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((HOST, port), timeout=1) as sock:
                sock.sendall(b"PING\r\n")
                if sock.recv(64).startswith(b"+PONG"):
                    return
        except OSError:
            pass
        if child.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"redis-server on port {port} did not start")
        time.sleep(0.01)
