"""Readiness tells the truth: a backend that dies reads `down` at the next probe, without any call to it first,
whether it was an HTTP server that was killed or a stdio child that exited; and `up` again once it is back."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from tests.support.configs import together_data, write_toml
from tests.support.processes import free_port, http_backend, serve
from tests.support.profiles import TENANTS

pytestmark = pytest.mark.anyio


def children(pid: int) -> list[int]:
    """The live child processes of ``pid`` (Linux /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(stat.parent.name))
    return found


async def readiness(base: str) -> tuple[dict[str, Any], str]:
    async with httpx.AsyncClient(timeout=30) as http:
        ready = (await http.get(f"{base}/readyz")).json()
        metrics = (await http.get(f"{base}/metrics")).text
    return ready, metrics


async def test_a_killed_http_backend_and_an_exited_stdio_child_read_down_within_seconds(tmp_path: Path) -> None:
    http_db = tmp_path / "tenants.db"  # the flags backend (stdio) gets flags.db beside it
    backend_port, port = free_port(), free_port()
    data = together_data(
        TENANTS,
        http_db,
        state_dir=tmp_path / "state",
        store=f"sqlite:{tmp_path}/gateway.db",
        backends={"tenants": {"transport": "http", "url": f"http://127.0.0.1:{backend_port}/mcp"}},
    )
    config = write_toml(data, tmp_path / "gateway.toml")
    base = f"http://127.0.0.1:{port}"
    async with serve(config, port) as gateway:
        async with http_backend(TENANTS, http_db, backend_port, *TENANTS.seed_demo):
            ready, metrics = await readiness(base)
            assert set(ready["backends"].values()) == {"up"}, ready
            assert 'gateway_backend_connected{backend="tenants"} 1.0' in metrics
        # The HTTP backend is gone; nothing has called it since.
        with anyio.fail_after(5):
            ready, metrics = await readiness(base)
        assert ready["backends"]["tenants"] == "down", ready
        assert 'gateway_backend_connected{backend="tenants"} 0.0' in metrics
        assert ready["backends"]["flags"] == "up", ready
        # The stdio child exits (killed from outside); the next probe says so.
        for child in children(gateway.pid):
            os.kill(child, signal.SIGKILL)
        await anyio.sleep(0.2)
        with anyio.fail_after(5):
            ready, _ = await readiness(base)
        assert ready["backends"]["flags"] == "down", ready
        # Both come back without a restart of the gateway.
        async with http_backend(TENANTS, http_db, backend_port):
            with anyio.fail_after(60):
                while set(ready["backends"].values()) != {"up"}:
                    await anyio.sleep(0.5)
                    ready, _ = await readiness(base)
