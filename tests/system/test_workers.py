"""``serve --workers N``: N real gateway processes behind one port under a supervisor, on a real Redis.

Many calls over one port are answered, a second supervisor on the same port is refused, each burst of new
connections is spread over both workers, a killed worker is replaced, every scrape of /metrics reports all workers'
calls (a dead worker's included), SIGTERM lets a confirmed write in flight settle and ends every worker and the
supervisor with status 0, and stores one process owns (SQLite, memory) refuse a second worker with a sentence
saying why.
The replica tests run against ``--workers 2`` too (tests/system/test_replicas.py).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from prometheus_client.multiprocess import MultiProcessCollector

from tests.support.clients import Answers, new_key, preview
from tests.support.configs import config_data, write_toml
from tests.support.processes import free_port, http_backend, until
from tests.system.test_replicas import KEY_NEW, PROFILE, Replica, replicas, result_body

pytestmark = pytest.mark.anyio


def workers_of(replica: Replica) -> set[int]:
    """The supervisor's live children: its workers."""
    pid = replica.process.pid
    try:
        listed = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return set()
    return {int(child) for child in listed}


async def reads(port: int, callers: int, each: int) -> int:
    """``callers`` 2026-era SDK clients, each on its own connections, ``each`` list calls; how many answered."""
    answered = 0

    async def caller() -> None:
        nonlocal answered
        async with Client(f"http://127.0.0.1:{port}/mcp") as client:
            for _ in range(each):
                result = await client.call_tool(PROFILE.list_tool, {})
                assert not result.is_error, result.content
                answered += 1

    async with anyio.create_task_group() as group:
        for _ in range(callers):
            group.start_soon(caller)
    return answered


async def scraped(port: int, times: int = 6) -> list[tuple[float, str]]:
    """``times`` scrapes of /metrics, each on a fresh connection (so the kernel may hand each to either worker):
    the total of ok list calls each reports, and its backend_connected lines."""
    calls = f'gateway_tool_calls_total{{outcome="ok",tool="{PROFILE.list_tool}"}} '
    found: list[tuple[float, str]] = []
    for _ in range(times):
        async with httpx2.AsyncClient() as http:
            text = (await http.get(f"http://127.0.0.1:{port}/metrics")).text
        total = sum(float(line.removeprefix(calls)) for line in text.splitlines() if line.startswith(calls))
        connected = [line for line in text.splitlines() if line.startswith("gateway_backend_connected{")]
        found.append((total, "\n".join(connected)))
    return found


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "backend.db"


async def test_two_workers_on_redis_answer_many_calls_a_killed_one_is_replaced_and_sigterm_ends_all(
    tmp_path: Path, db: Path, redis_url: str
) -> None:
    backend = free_port()
    async with (
        http_backend(PROFILE, db, backend, *PROFILE.seed_demo),
        replicas(tmp_path, backend, redis_url, [KEY_NEW], workers=2) as (supervisor,),
    ):
        await until(lambda: len(workers_of(supervisor)) == 2)
        first = workers_of(supervisor)
        assert await reads(supervisor.port, callers=8, each=10) == 80
        config = tmp_path / "replica0" / "gateway.toml"
        again = [sys.executable, "-m", "gateway", "serve", "--config", str(config), "--port", str(supervisor.port)]
        second = subprocess.run([*again, "--workers", "2"], capture_output=True, text=True, timeout=60)  # noqa: ASYNC221
        assert second.returncode == 1 and "is already in use" in second.stderr, second.stderr  # SO_REUSEPORT or not
        connected = 'gateway_backend_connected{backend="default"} 1.0'
        assert await scraped(supervisor.port) == [(80, connected)] * 6

        doomed = min(first)
        os.kill(doomed, signal.SIGKILL)
        await until(lambda: doomed not in workers_of(supervisor) and len(workers_of(supervisor)) == 2, 30)
        assert await reads(supervisor.port, callers=4, each=5) == 20
        with anyio.fail_after(30):  # 0 from the new worker's start until its backend answers (the live workers' least)
            found = await scraped(supervisor.port)
            while [line for _, line in found] != [connected] * 6:
                await anyio.sleep(0.2)
                found = await scraped(supervisor.port)
        assert found == [(100, connected)] * 6  # the killed worker's 80 still counted

        now = workers_of(supervisor)
        supervisor.process.send_signal(signal.SIGTERM)
        await until(lambda: supervisor.process.poll() is not None, 30)
        assert supervisor.process.returncode == 0
        assert not [pid for pid in now if os.path.exists(f"/proc/{pid}")]  # noqa: ASYNC240 - after the process ended
    log = (tmp_path / "replica0" / "stderr.log").read_text()
    assert "starting another" in log, log


async def test_sigterm_lets_a_confirmed_write_in_flight_on_a_worker_settle(
    tmp_path: Path, db: Path, redis_url: str
) -> None:
    backend = free_port()
    async with (
        http_backend(PROFILE, db, backend, *PROFILE.seed_demo, "--fault", "latency=1500"),
        replicas(tmp_path, backend, redis_url, [KEY_NEW], workers=2) as (supervisor,),
    ):
        await until(lambda: len(workers_of(supervisor)) == 2)
        answers = Answers()
        async with Client(f"http://127.0.0.1:{supervisor.port}/mcp", elicitation_callback=answers) as client:
            args = {"planId": (await preview(client, PROFILE))["planId"], "idempotencyKey": new_key()}
            done: list[dict[str, object]] = []

            async def write() -> None:
                done.append(result_body(await client.call_tool(PROFILE.write_tool, args)))

            async with anyio.create_task_group() as group:
                group.start_soon(write)
                await until(lambda: len(answers.prompts) == 1, 30)
                await anyio.sleep(0.5)  # the confirmed round is in the backend's 1.5 s
                supervisor.process.send_signal(signal.SIGTERM)
        assert done and done[0]["replayed"] is False
        assert PROFILE.write_count(db) == 1
        await until(lambda: supervisor.process.poll() is not None, 30)
        assert supervisor.process.returncode == 0


def calls_by_worker(shared: Path) -> dict[str, float]:
    """The ok list calls each worker counted, from the files the workers keep their metrics in."""
    calls: dict[str, float] = {}
    for file in shared.glob("mcp-safety-gateway-metrics-*/counter_*.db"):
        for metric in MultiProcessCollector.merge([str(file)]):  # type: ignore[no-untyped-call]
            for sample in metric.samples:
                if sample.name == "gateway_tool_calls_total" and sample.labels["tool"] == PROFILE.list_tool:
                    calls[file.stem] = calls.get(file.stem, 0) + sample.value
    return calls


async def test_two_workers_take_about_half_of_each_burst_of_new_connections(
    tmp_path: Path, db: Path, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each worker listens on a socket of its own on the port (SO_REUSEPORT), so the kernel spreads a burst of
    connections over them. On one shared socket the worker that woke first accepted every connection waiting: 6
    bursts of 32 split 32:0, 29:3, 30:2 and the like (their imbalances |a-b| summed to 126 and 152 in two runs);
    spread evenly, each burst's |a-b| averages about 4.5, and a sum past 60 over 6 bursts is a
    one-in-ten-thousand run."""
    shared = tmp_path / "tmp"
    shared.mkdir()
    monkeypatch.setenv("TMPDIR", str(shared))  # where the supervisor makes its metrics directory
    backend = free_port()
    imbalance = 0.0
    async with (
        http_backend(PROFILE, db, backend, *PROFILE.seed_demo),
        replicas(tmp_path, backend, redis_url, [KEY_NEW], workers=2) as (supervisor,),
    ):
        await until(lambda: len(workers_of(supervisor)) == 2)
        await until(lambda: len(list(shared.glob("mcp-safety-gateway-metrics-*/gauge_livemin_*.db"))) == 2, 30)
        before: dict[str, float] = {}
        for _ in range(6):  # 32 clients at once, each on a connection of its own
            assert await reads(supervisor.port, callers=32, each=1) == 32
            after = calls_by_worker(shared)
            burst = [after[worker] - before.get(worker, 0) for worker in after]
            fewer, more = sorted([*burst, 0.0, 0.0])[-2:]  # a worker that took none yet has no file
            imbalance += more - fewer
            before = after
    assert sum(before.values()) == 6 * 32
    assert imbalance <= 60, (imbalance, before)


@pytest.mark.parametrize("store", ["sqlite", "memory"])
def test_stores_one_process_owns_refuse_a_second_worker_saying_why(tmp_path: Path, db: Path, store: str) -> None:
    url = f"sqlite:{tmp_path / 'store.db'}" if store == "sqlite" else "memory"
    data = config_data(PROFILE, db, store=url, state_dir=tmp_path / "state")
    config = write_toml({k: v for k, v in data.items() if v is not None}, tmp_path / "gateway.toml")
    args = [sys.executable, "-m", "gateway", "serve", "--config", str(config), "--port", str(free_port())]
    done = subprocess.run([*args, "--workers", "2"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "--workers 2 needs a store that several processes share (redis:// or postgresql://)" in done.stderr
    assert ("SQLite store is held by one serve process" if store == "sqlite" else "memory store lives") in (done.stderr)
    assert not (tmp_path / "store.db").exists()
