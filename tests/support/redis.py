"""A real redis-server on a loopback port, for the shared-store tests and benchmarks."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.support.processes import HOST, free_port

REDIS_MISSING = (
    "redis-server or redis-sentinel is not installed: apt-get install redis-server redis-sentinel "
    "(CI runs .ci/setup-redis.sh)"
)


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


@dataclass
class SentinelGroup:
    """A primary, one replica and three sentinels on loopback; the store URL that names them."""

    primary: subprocess.Popen[bytes]
    replica: subprocess.Popen[bytes]
    primary_port: int
    replica_port: int
    sentinel_ports: list[int]

    def url(self, **params: str) -> str:
        hosts = ",".join(f"{HOST}:{port}" for port in self.sentinel_ports)
        query = "&".join(f"{name}={value}" for name, value in params.items())
        return f"redis+sentinel://{hosts}/{SERVICE}/0" + (f"?{query}" if query else "")


SERVICE = "mymaster"


@contextmanager
def sentinel_group(directory: Path) -> Iterator[SentinelGroup]:
    """A real primary, a replica of it and three redis-sentinels watching them (failover after 1 s down), ready
    (the replica in sync, every sentinel knowing the replica) when yielded; all killed afterwards."""
    server, sentinel = shutil.which("redis-server"), shutil.which("redis-sentinel")
    if server is None or sentinel is None:
        raise RedisMissing(REDIS_MISSING)
    primary_port, replica_port = free_port(), free_port()
    sentinel_ports = [free_port() for _ in range(3)]
    children: list[subprocess.Popen[bytes]] = []

    def start(args: list[str], name: str) -> subprocess.Popen[bytes]:
        where = directory / name
        where.mkdir(parents=True, exist_ok=True)
        with (where / "log").open("ab") as log:
            child = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, cwd=where)
        children.append(child)
        return child

    common = ["--bind", HOST, "--save", "", "--appendonly", "no", "--repl-diskless-sync-delay", "0"]
    try:
        primary = start([server, "--port", str(primary_port), *common], "primary")
        wait_for_pong(primary_port, primary)
        replica = start(
            [server, "--port", str(replica_port), *common, "--replicaof", HOST, str(primary_port)], "replica"
        )
        wait_for_pong(replica_port, replica)
        for n, port in enumerate(sentinel_ports):
            conf = directory / f"sentinel{n}.conf"
            conf.write_text(
                f"port {port}\nbind {HOST}\ndir {directory}\n"
                f"sentinel monitor {SERVICE} {HOST} {primary_port} 2\n"
                f"sentinel down-after-milliseconds {SERVICE} 1000\n"
                f"sentinel failover-timeout {SERVICE} 5000\n"
                f"sentinel known-replica {SERVICE} {HOST} {replica_port}\n"
            )
            wait_for_pong(port, start([sentinel, str(conf)], f"sentinel{n}"))
        group = SentinelGroup(primary, replica, primary_port, replica_port, sentinel_ports)
        _wait_until_ready(group)
        yield group
    finally:
        for child in children:
            child.kill()
            child.wait()


def _wait_until_ready(group: SentinelGroup, timeout: float = 30) -> None:
    """Until the replica is in sync and every sentinel lists it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if b"master_link_status:up" in _ask(group.replica_port, "INFO replication") and all(
            str(group.replica_port).encode() in _ask(port, f"SENTINEL replicas {SERVICE}")
            for port in group.sentinel_ports
        ):
            return
        time.sleep(0.05)
    raise RuntimeError("the Redis replica or the sentinels did not get ready")


def _ask(port: int, command: str) -> bytes:
    """One inline command's raw answer (enough to look for a word in it)."""
    try:
        with socket.create_connection((HOST, port), timeout=1) as sock:
            sock.sendall(command.encode() + b"\r\n")
            time.sleep(0.05)
            return sock.recv(65536)
    except OSError:
        return b""
