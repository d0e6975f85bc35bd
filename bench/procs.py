"""The processes under test, all on loopback: the legacy backend, the gateway in front of it, and mcp-proxy.

Every process is started in its own process group, waited for (its port open) and terminated on exit, so a
bench run never leaves anything behind, even when it fails half-way.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gateway.config import GatewayConfig, to_toml

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
PROXY_VENV = ROOT / "bench" / ".venv-proxy"
HOST = "127.0.0.1"


@dataclass
class Server:
    """A started server: its process, its MCP endpoint, and the log it writes."""

    name: str
    process: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def url(self) -> str:
        """The streamable-HTTP endpoint."""
        return f"http://{HOST}:{self.port}/mcp"

    def cpu_seconds(self) -> dict[str, float]:
        """CPU time (user + system) used so far by the process and by each of its children."""
        own = cpu_seconds(self.process.pid)
        return {"server": own, "children": sum(cpu_seconds(pid) for pid in _children(self.process.pid))}

    def rss_mib(self, *, children: bool = True) -> float:
        """Resident memory of the process (and its children) in MiB."""
        pids = [self.process.pid, *(_children(self.process.pid) if children else [])]
        return sum(rss_kib(pid) for pid in pids) / 1024


def free_port() -> int:
    """A free loopback TCP port."""
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def rss_kib(pid: int) -> int:
    """VmRSS of a process, 0 when it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, 0 when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            text = (task / "children").read_text().split()
            found += [int(child) for child in text]
    except OSError:
        return found
    return found + [grandchild for child in found for grandchild in _children(child)]


def wait_for_port(port: int, process: subprocess.Popen[bytes], log: Path, timeout: float = 120.0) -> None:
    """Block until the port accepts connections; fail if the process exits or the time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"process exited with {process.returncode}; see {log}")
        try:
            with socket.create_connection((HOST, port), timeout=1):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"port {port} did not open within {timeout:.0f}s; see {log}")


@contextmanager
def started(name: str, args: list[str], port: int, logs: Path, env: dict[str, str] | None = None) -> Iterator[Server]:
    """Run a server process until the block ends; its stdout and stderr go to ``logs/NAME.log``."""
    log = logs / f"{name}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            env={**os.environ, **(env or {})},
            start_new_session=True,
        )
        try:
            wait_for_port(port, process, log)
            yield Server(name, process, port, log)
        finally:
            stop(process)


def stop(process: subprocess.Popen[bytes]) -> None:
    """Terminate a process group started here, and kill it if it lingers."""
    if process.poll() is None:
        try:
            os.killpg(process.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def backend_args(db: Path, *, tenants: int | None) -> list[str]:
    """Seed flags: the demo set (5 tenants) when ``tenants`` is None, else N bulk tenants."""
    seed = ["--seed-demo"] if tenants is None else ["--seed-tenants", str(tenants)]
    return ["--db", str(db), *seed, "--log-level", "WARNING"]


def seed_database(db: Path, *, tenants: int | None) -> None:
    """Create and seed a backend database up front (so no timed call pays for seeding)."""
    from legacy_backend.store import Store

    store = Store(db)
    try:
        store.seed(demo=tenants is None, bulk_tenants=tenants or 0)
    finally:
        store.close()


@contextmanager
def direct_backend(db: Path, logs: Path) -> Iterator[Server]:
    """The legacy backend itself over streamable HTTP: the one-hop baseline."""
    port = free_port()
    args = [PYTHON, "-m", "legacy_backend", "--http", f"{HOST}:{port}", *backend_args(db, tenants=None)]
    with started("direct", args, port, logs) as server:
        yield server


@contextmanager
def mcp_proxy(db: Path, logs: Path) -> Iterator[Server]:
    """mcp-proxy exposing the backend's stdio as streamable HTTP: HTTP in front, stdio behind."""
    port = free_port()
    proxy = PROXY_VENV / "bin" / "mcp-proxy"
    backend = [PYTHON, "-m", "legacy_backend", "--stdio", *backend_args(db, tenants=None)]
    args = [str(proxy), "--host", HOST, "--port", str(port), "--log-level", "WARNING", "--", *backend]
    with started("mcp-proxy", args, port, logs) as server:
        yield server


def gateway_config(path: Path, db: Path, *, store: str, tenants: int | None, state_dir: Path) -> Path:
    """The default config over a stdio backend on ``db``, with the given store; written as TOML to ``path``."""
    data: dict[str, Any] = tomllib.loads((ROOT / "config" / "gateway.toml").read_text())
    data["gateway"] = {**data["gateway"], "store": store, "state_dir": str(state_dir)}
    data["backend"] = {
        **data["backend"],
        "command": PYTHON,
        "args": ["-m", "legacy_backend", "--stdio", *backend_args(db, tenants=tenants)],
    }
    if "rate_limits" in GatewayConfig.model_fields:
        # A load generator is one caller: lift the per-caller limit, or the bench measures the limiter's refusals.
        data["rate_limits"] = {"per_caller": {"per_second": 1e9, "burst": 1_000_000_000}}
    path.write_text(to_toml(data))
    return path


@contextmanager
def gateway(
    config: Path, logs: Path, name: str = "gateway", env: dict[str, str] | None = None, *, h11: bool = False
) -> Iterator[Server]:
    """``mcp-safety-gateway serve`` over HTTP, its backend a stdio child (``h11``: see whatif_h11)."""
    port = free_port()
    program = ["bench/whatif_h11.py"] if h11 else ["-m", "gateway"]
    args = [PYTHON, *program, "serve", "--config", str(config), "--port", str(port), "--log-level", "warning"]
    with started(name, args, port, logs, env) as server:
        yield server


@contextmanager
def redis_server(logs: Path) -> Iterator[int]:
    """A throwaway redis-server on loopback with persistence off; yields its port."""
    port = free_port()
    args = ["redis-server", "--bind", HOST, "--port", str(port), "--save", "", "--appendonly", "no"]
    with started("redis", args, port, logs):
        yield port
