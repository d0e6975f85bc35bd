"""A 2026-era client's ``subscriptions/listen`` stream over real HTTP does not hold the gateway up: on SIGTERM the
stream is ended gracefully (its result sent, not dropped) and ``serve`` exits within seconds."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import anyio
import pytest
from mcp import Client

from tests.support.configs import config_data, write_toml
from tests.support.processes import free_port, serve
from tests.support.profiles import TENANTS

pytestmark = pytest.mark.anyio


async def test_sigterm_ends_open_listen_streams_gracefully_and_serve_exits(tmp_path: Path) -> None:
    data = config_data(TENANTS, tmp_path / "backend.db", *TENANTS.seed_demo, state_dir=tmp_path / "state")
    port = free_port()
    async with (
        serve(write_toml(data, tmp_path / "gateway.toml"), port) as gateway,
        Client(f"http://127.0.0.1:{port}/mcp") as client,
    ):
        async with client.listen(tools_list_changed=True) as first, client.listen(tools_list_changed=True) as second:
            os.kill(gateway.pid, signal.SIGTERM)
            with anyio.fail_after(10):
                events = [event async for event in first] + [event async for event in second]
        with anyio.fail_after(10):
            while gateway.poll() is None:  # noqa: ASYNC110 - a child process, polled
                await anyio.sleep(0.05)
    assert events == []  # a graceful end: the loop stops, no SubscriptionLost
    assert gateway.returncode == 0
