"""Child processes on loopback: free ports, waiting for a port, starting and stopping processes.

Tests use the async ``process`` (a ``Popen`` waited for without blocking the event loop); the benchmarks and the
soak use ``Proc``, a restartable child in its own process group with a log file, so nothing is left behind.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from tests.support.profiles import Profile

HOST = "127.0.0.1"
PYTHON = sys.executable
ROOT = Path(__file__).resolve().parent.parent.parent


def free_port() -> int:
    """A free loopback TCP port."""
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def port_open(port: int) -> bool:
    """Whether something accepts connections on the loopback port now."""
    with socket.socket() as sock:
        return sock.connect_ex((HOST, port)) == 0


async def wait_for_port(port: int, exited: Callable[[], bool] = lambda: False) -> None:
    """Until something accepts connections on the loopback port (60 s at most); fails at once if ``exited()``
    says the process that should listen there is gone."""
    with anyio.fail_after(60):
        while True:
            assert not exited(), f"the process meant to listen on {port} exited during start-up"
            try:
                stream = await anyio.connect_tcp(HOST, port)
            except OSError:
                await anyio.sleep(0.05)
                continue
            await stream.aclose()
            return


async def until(condition: Callable[[], bool], seconds: float = 60) -> None:
    """Poll another process's state (a file, a database, a Redis) until ``condition`` holds (``seconds`` at most)."""
    with anyio.fail_after(seconds):
        while True:
            if condition():
                return
            await anyio.sleep(0.02)


def wait_for_port_blocking(
    port: int, process: subprocess.Popen[bytes], timeout: float = 120, log: Path | None = None
) -> None:
    """Block until the port accepts connections; fail if the process exits or the time runs out."""
    where = f"; see {log}" if log is not None else ""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"process exited with {process.returncode} before listening on {port}{where}")
        if port_open(port):
            return
        time.sleep(0.05)
    raise RuntimeError(f"port {port} did not open within {timeout:.0f}s{where}")


@asynccontextmanager
async def process(args: list[str], port: int | None = None, **popen: Any) -> AsyncIterator[subprocess.Popen[Any]]:
    """A real child process, waited for (its port open) and terminated afterwards."""
    child = subprocess.Popen(args, **popen)  # noqa: ASYNC220 - a quick fork; the wait below is async
    try:
        if port is not None:
            await wait_for_port(port, lambda: child.poll() is not None)
        yield child
    finally:
        child.terminate()
        try:
            child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


@dataclass
class Proc:
    """A restartable child in its own process group, listening on a fixed port, logging to a file."""

    args: list[str]
    port: int
    log: Path
    env: dict[str, str] = field(default_factory=dict)
    cwd: Path = ROOT
    process: subprocess.Popen[bytes] | None = None
    starts: int = 0

    def start(self, timeout: float = 120) -> None:
        """Start it and wait for its port."""
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                self.args,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.cwd,
                env={**os.environ, **self.env},
                start_new_session=True,
            )
        self.starts += 1
        wait_for_port_blocking(self.port, self.process, timeout, self.log)

    def alive(self) -> bool:
        """Whether it runs now."""
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL the whole group, as a crash would."""
        if self.process is not None and self.alive():
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        """SIGTERM the whole group, and SIGKILL it if it lingers."""
        if self.process is not None and self.alive():
            try:
                os.killpg(self.process.pid, signal.SIGTERM)
            except ProcessLookupError:
                return
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()


@contextmanager
def started(args: list[str], port: int, log: Path, env: dict[str, str] | None = None) -> Iterator[Proc]:
    """Run a process until the block ends (blocking start, for the benchmarks and the soak)."""
    proc = Proc(args, port, log, env or {})
    try:
        proc.start()
        yield proc
    finally:
        proc.stop()


def serve_args(config: Path, port: int, *extra: str) -> list[str]:
    """The command line of ``mcp-safety-gateway serve`` over HTTP on a loopback port."""
    return [PYTHON, "-m", "gateway", "serve", "--config", str(config), "--port", str(port), *extra]


def serve(config: Path, port: int, stderr: Any = subprocess.DEVNULL, **popen: Any) -> Any:
    """``mcp-safety-gateway serve`` as a real process on a loopback port."""
    return process(serve_args(config, port), port, stderr=stderr, **popen)


def backend_args(profile: Profile, db: Path, *extra: str, port: int | None = None) -> list[str]:
    """The profile's backend on ``db``: over stdio, or over streamable HTTP when a port is given."""
    transport = ["--stdio"] if port is None else ["--http", f"{HOST}:{port}"]
    return [PYTHON, "-m", profile.backend_module, *transport, "--db", str(db), *extra]


def hostile_args(port: int, log: Path, *extra: str) -> list[str]:
    """tests/hostile_backend over streamable HTTP on a loopback port, logging what it hears to ``log``."""
    return [PYTHON, "-m", "tests.hostile_backend", "--http", f"{HOST}:{port}", "--log", str(log), *extra]


def http_backend(profile: Profile, db: Path, port: int, *extra: str) -> Any:
    """The profile's backend over streamable HTTP on a loopback port."""
    return process(backend_args(profile, db, *extra, port=port), port)


async def audit_list(config: Path) -> list[dict[str, Any]]:
    """Every audit entry of the config's store, as ``mcp-safety-gateway audit list --json`` prints them."""
    command = [PYTHON, "-m", "gateway", "audit", "list", "--json", "--config", str(config)]
    listed = await anyio.run_process(command, cwd=ROOT)
    return [json.loads(line) for line in listed.stdout.decode().splitlines()]


def peak_memory_bytes(pid: int) -> int:
    """A live process's peak resident memory (Linux ``VmHWM``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmHWM for process {pid}")
