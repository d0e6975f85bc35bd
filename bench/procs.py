"""The processes under test, all on loopback: the legacy backend, the gateway in front of it, and mcp-proxy.

Every process is a tests.support.processes.Proc: started in its own process group, waited for (its port open)
and terminated on exit, so a bench run never leaves anything behind, even when it fails half-way.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.support import processes
from tests.support.configs import config_data, write_toml
from tests.support.processes import HOST, PYTHON, ROOT, Proc, free_port
from tests.support.profiles import TENANTS

PROXY_VENV = ROOT / "bench" / ".venv-proxy"
FASTMCP_VENV = ROOT / "bench" / ".venv-fastmcp"
"""fastmcp in a venv of its own (bench/run makes it): it pins its own mcp."""
__all__ = ["HOST", "PYTHON", "ROOT", "Server", "free_port"]


@dataclass
class Server:
    """A started server: its process, its MCP endpoint, and the log it writes."""

    name: str
    proc: Proc

    @property
    def process(self) -> subprocess.Popen[bytes]:
        """The running process."""
        assert self.proc.process is not None
        return self.proc.process

    @property
    def port(self) -> int:
        """Its loopback port."""
        return self.proc.port

    @property
    def log(self) -> Path:
        """Where its stdout and stderr go."""
        return self.proc.log

    @property
    def url(self) -> str:
        """The streamable-HTTP endpoint."""
        return f"http://{HOST}:{self.port}/mcp"

    def cpu_seconds(self) -> dict[str, float]:
        """CPU time (user + system) used so far by the server (the process, and the workers ``serve --workers``
        forks) and by its backend children."""
        below = _children(self.process.pid)
        backends = [pid for pid in below if _is_backend(pid)]
        server = [self.process.pid, *(pid for pid in below if pid not in backends)]
        return {
            "server": sum(cpu_seconds(pid) for pid in server),
            "children": sum(cpu_seconds(pid) for pid in backends),
        }

    def rss_mib(self, *, children: bool = True) -> float:
        """Resident memory of the process (and its children) in MiB."""
        pids = [self.process.pid, *(_children(self.process.pid) if children else [])]
        return sum(rss_kib(pid) for pid in pids) / 1024


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


def _is_backend(pid: int) -> bool:
    """Whether a process is a backend (the legacy backend's module is on its command line)."""
    try:
        return b"legacy_backend" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def _children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            text = (task / "children").read_text().split()
            found += [int(child) for child in text]
    except OSError:
        return found
    return found + [grandchild for child in found for grandchild in _children(child)]


@contextmanager
def started(name: str, args: list[str], port: int, logs: Path, env: dict[str, str] | None = None) -> Iterator[Server]:
    """Run a server process until the block ends; its stdout and stderr go to ``logs/NAME.log``."""
    with processes.started(args, port, logs / f"{name}.log", env) as proc:
        yield Server(name, proc)


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


@contextmanager
def fastmcp_proxy(db: Path, logs: Path) -> Iterator[Server]:
    """FastMCP's proxy (``create_proxy``, bench/fastmcp_proxy.py) exposing the backend's stdio as streamable HTTP."""
    port = free_port()
    python = FASTMCP_VENV / "bin" / "python"
    backend = [PYTHON, "-m", "legacy_backend", "--stdio", *backend_args(db, tenants=None)]
    args = [str(python), str(ROOT / "bench" / "fastmcp_proxy.py"), HOST, str(port), "--", *backend]
    with started("fastmcp-proxy", args, port, logs) as server:
        yield server


def gateway_config(path: Path, db: Path, *, store: str, tenants: int | None, state_dir: Path) -> Path:
    """The default config over a stdio backend on ``db``, with the given store; written as TOML to ``path``.
    No per-caller rate limit: a load generator is one caller, and the bench would measure the limiter."""
    data = config_data(TENANTS, db, *backend_args(db, tenants=tenants)[2:], store=store, state_dir=state_dir)
    data["backend"]["call_timeout_seconds"] = 30
    return write_toml(data, path)


@contextmanager
def gateway(
    config: Path,
    logs: Path,
    name: str = "gateway",
    env: dict[str, str] | None = None,
    *,
    h11: bool = False,
    workers: int = 1,
) -> Iterator[Server]:
    """``mcp-safety-gateway serve`` over HTTP, its backend a stdio child (``h11``: see whatif_h11; ``workers``:
    ``serve --workers``)."""
    port = free_port()
    program = ["bench/whatif_h11.py"] if h11 else ["-m", "gateway"]
    args = [PYTHON, *program, "serve", "--config", str(config), "--port", str(port), "--log-level", "warning"]
    args += ["--workers", str(workers)]
    with started(name, args, port, logs, env) as server:
        yield server


@contextmanager
def postgres_server(**params: str) -> Iterator[str]:
    """A throwaway PostgreSQL server on loopback (fsync on, as in production) with a migrated schema; yields the
    store URL, with ``params`` added to it."""
    import anyio

    from gateway.stores.postgres.schema import migrate
    from tests.support.postgres import fresh_schema, postgres_process

    with postgres_process(free_port()) as server:
        url = fresh_schema(server.url, **params)
        anyio.run(migrate, url)
        yield url


STORES = ("memory", "sqlite", "redis", "postgres")


def store_available(name: str) -> str | None:
    """Why a store cannot be measured on this machine (its server is not installed), or None."""
    from tests.support.postgres import server_bin

    if name == "redis" and not shutil.which("redis-server"):
        return "no redis-server binary"
    if name == "postgres" and server_bin() is None:
        return "no PostgreSQL server binaries"
    return None


def store_url(name: str, work: Path, stack: ExitStack, tag: str) -> str:
    """A store to measure by name: ``memory``, ``sqlite`` (a file named by ``tag`` in ``work``), or a fresh
    ``redis`` or ``postgres`` server that ``stack`` stops."""
    if name == "sqlite":
        return f"sqlite:{work}/{tag}-store.db"
    if name == "redis":
        return f"redis://{HOST}:{stack.enter_context(redis_server(work / tag))}/0"
    if name == "postgres":
        return stack.enter_context(postgres_server())
    return name


@contextmanager
def redis_server(logs: Path) -> Iterator[int]:
    """A throwaway redis-server on loopback with persistence off; yields its port."""
    from tests.support.redis import redis_process

    port = free_port()
    with redis_process(logs / "redis", port):
        yield port
