"""A real PostgreSQL server on a loopback port, for the PostgreSQL store's tests and benchmarks.

The server refuses to run as root, and CI runs as root: then ``initdb`` and ``pg_ctl`` run as ``nobody`` in a
temporary directory that user owns (Debian's ``postgresql`` package, installed by .ci/setup-postgres.sh, puts the
binaries under /usr/lib/postgresql/VERSION/bin). Authentication is ``trust`` on loopback: the tests carry no
password. One server serves a whole test session; each test gets a schema of its own, migrated
(``fresh_schema``), which is far cheaper than a database per test.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

HOST = "127.0.0.1"  # loopback; stdlib only here, as bench/pgdriver.py runs this in another venv

POSTGRES_MISSING = "PostgreSQL is not installed: apt-get install postgresql (CI runs .ci/setup-postgres.sh)"


class PostgresMissing(Exception):
    """No PostgreSQL server binaries were found."""


def server_bin() -> Path | None:
    """The newest installed server's bin directory (pg_ctl, initdb, postgres), or None."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"), key=lambda path: int(path.parent.parent.name))
    if found:
        return found[-1].parent
    on_path = shutil.which("pg_ctl")
    return Path(on_path).parent if on_path else None


@dataclass
class PostgresServer:
    """A running throwaway server: its port, its data directory, and how to stop and start it again."""

    directory: Path
    port: int
    bin: Path
    fsync: bool = True

    @property
    def url(self) -> str:
        """The URL of its ``postgres`` database as the superuser ``postgres`` (trust: no password)."""
        return f"postgresql://postgres@{HOST}:{self.port}/postgres"

    def pg_ctl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[bytes]:
        """Run pg_ctl on this server's data directory, as the user that owns it."""
        data, log = self.directory / "data", self.directory / "server.log"
        fsync = "on" if self.fsync else "off"
        options = f"-p {self.port} -k {self.directory} -c listen_addresses={HOST} -c fsync={fsync}"
        command = [str(self.bin / "pg_ctl"), "-D", str(data), "-l", str(log), "-o", options, "-w", *args]
        return _as_owner(command, check=check)

    def stop(self, mode: str = "fast") -> None:
        """Stop it (``immediate``: like a crash, the next start replays the WAL)."""
        self.pg_ctl("-m", mode, "stop")

    def start(self) -> None:
        """Start it again on the same data (waits until it accepts connections)."""
        self.pg_ctl("start")

    def running(self) -> bool:
        """Whether the server is up (pg_ctl status)."""
        return self.pg_ctl("status", check=False).returncode == 0

    def signal_all(self, signal_number: int) -> None:
        """Send a signal to the postmaster and every server process it started (SIGSTOP: a server that stalls
        with its connections open; SIGCONT: it goes on)."""
        postmaster = self.postmaster()
        children = [int(stat.parent.name) for stat in Path("/proc").glob("[0-9]*/stat") if _parent(stat) == postmaster]
        for pid in [postmaster, *children]:
            os.kill(pid, signal_number)

    def postmaster(self) -> int:
        """The postmaster's process id."""
        return int((self.directory / "data" / "postmaster.pid").read_text().split()[0])


@contextmanager
def postgres_process(port: int, *, fsync: bool = True) -> Iterator[PostgresServer]:
    """A real PostgreSQL server on a loopback port, accepting connections when yielded, stopped and its data
    deleted afterwards. Its directory is made in the system's temporary folder (pytest's are private to root,
    and the server's user must reach it).

    ``fsync=False`` is for tests: a commit still reaches the operating system before it is acknowledged, so it
    survives the server being killed (what the tests do), just not the machine losing power."""
    binaries = server_bin()
    if binaries is None:
        raise PostgresMissing(POSTGRES_MISSING)
    directory = Path(tempfile.mkdtemp(prefix="gateway-postgres-"))
    try:
        if os.geteuid() == 0:
            shutil.chown(directory, "nobody")
        server = PostgresServer(directory, port, binaries, fsync)
        _as_owner([str(binaries / "initdb"), "-D", str(directory / "data"), "-U", "postgres", "-A", "trust", "-N"])
        server.start()
        try:
            yield server
        finally:
            server.pg_ctl("-m", "immediate", "stop", check=False)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def fresh_schema(server_url: str, **params: str) -> str:
    """A store URL on the server naming a new, empty schema (migrate it before use), with ``params`` added."""
    query = "&".join(f"{name}={value}" for name, value in {"schema": f"t_{uuid.uuid4().hex[:12]}", **params}.items())
    return f"{server_url}?{query}"


def _as_owner(command: list[str], check: bool = True) -> subprocess.CompletedProcess[bytes]:
    """Run a server command as ``nobody`` when this process is root (the server refuses root), else as is."""
    if os.geteuid() == 0:
        command = ["su", "-s", "/bin/sh", "nobody", "-c", " ".join(_quoted(part) for part in command)]
    return subprocess.run(command, capture_output=True, check=check, timeout=120)


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def _parent(stat: Path) -> int | None:
    """The parent process id in a /proc/PID/stat file (None if the process is gone)."""
    try:
        return int(stat.read_text().rpartition(")")[2].split()[1])
    except (OSError, ValueError, IndexError):
        return None
