"""Several real `serve` replicas sharing one real Redis (or PostgreSQL), in front of one real legacy backend over
HTTP.

A plan previewed on one replica is redeemed on another, a retry on a third replays, concurrent calls spread
over replicas write once per key and per target, a replica killed mid-write (or crashing at any step) leaves its
key unknown and never written twice, and the replicas, sharing GATEWAY_SECRET_KEY, accept each other's sealed
requestState and cursors, also across a key rotation. 2025-era clients keep their stateful session on one
replica (a sticky balancer); 2026-era requests are stateless and a transport in the client plays the balancer.

The store is what is under test, so these run on one god-tool profile; the mapping is covered per profile
elsewhere. The tests of what the store shares (plans, keys, locks, nonces, the audit) run on both shared stores
(``shared_store``); a crash at each step of the write is tested on PostgreSQL in tests/system/test_crash.py.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp.types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from gateway.crashpoints import ENV_VAR, POINTS
from gateway.stores import open_store
from gateway.stores.redis.url import LEASE_MARGIN_SECONDS
from tests.support.approvals import TOKENS, approvals_section, url_mode
from tests.support.clients import Answers, connect, error_code, new_key, preview, running_gateway
from tests.support.configs import config_data, gateway_config, write_toml
from tests.support.processes import free_port, http_backend, process, until, wait_for_port
from tests.support.profiles import TENANTS
from tests.support.redis import redis_process

pytestmark = pytest.mark.anyio

PROFILE = TENANTS
KEY_OLD = "old-secret-0123456789abcdef0123456789abcdef"
KEY_NEW = "new-secret-0123456789abcdef0123456789abcdef"
SHORT_CALL = 2.0
SHORT_LEASE = SHORT_CALL + LEASE_MARGIN_SECONDS + 0.5
"""The shortest lock lease serve accepts over a 2 s backend call timeout: a dead replica's lock lapses soon."""


@dataclass(frozen=True)
class Replica:
    port: int
    process: subprocess.Popen[bytes]


@asynccontextmanager
async def replicas(
    tmp: Path,
    backend_port: int,
    store: str,
    rings: list[str],
    count: int = 1,
    crash_first_at: str | None = None,
    call_timeout: float = 20,
    change: Callable[[dict[str, Any], int], None] | None = None,
    workers: int = 1,
) -> AsyncIterator[list[Replica]]:
    """``count`` `serve` processes per GATEWAY_SECRET_KEY ring in ``rings``, started together, stopped after.

    ``crash_first_at`` makes the first replica die at that step of its first write (gateway.crashpoints);
    ``change`` edits each replica's config data, given its port; ``workers`` is each replica's ``--workers``.
    """
    started: list[Replica] = []
    try:
        for n, ring in enumerate(rings * count):
            directory = tmp / f"replica{n}"
            directory.mkdir()
            data = config_data(
                PROFILE,
                tmp / "backend.db",
                store=store,
                state_dir=directory / "state",
                backend={
                    "transport": "http",
                    "url": f"http://127.0.0.1:{backend_port}/mcp",
                    "call_timeout_seconds": call_timeout,
                },
            )
            port = free_port()
            if change is not None:
                change(data, port)
            config = write_toml(_without_none(data), directory / "gateway.toml")
            env = {**os.environ, "GATEWAY_SECRET_KEY": ring}
            if n == 0 and crash_first_at is not None:
                env[ENV_VAR] = crash_first_at
            args = [sys.executable, "-m", "gateway", "serve", "--config", str(config), "--port", str(port)]
            args += ["--workers", str(workers)]
            with (directory / "stderr.log").open("wb") as log:
                child = subprocess.Popen(args, env=env, stderr=log)  # noqa: ASYNC220 - a quick fork
            started.append(Replica(port, child))
        for replica in started:
            await wait_for_port(replica.port)
        yield started
    finally:
        for replica in started:
            replica.process.terminate()
        for replica in started:
            try:
                replica.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                replica.process.kill()
                replica.process.wait()


def _without_none(data: dict[str, Any]) -> dict[str, Any]:
    """TOML has no null: a key that is None is left out (its default applies)."""
    return {k: _without_none(v) if isinstance(v, dict) else v for k, v in data.items() if v is not None}


class Balancer(httpx2.AsyncBaseTransport):
    """A load balancer in the client: each HTTP request goes to the replica ``route`` picks (default: in turn)."""

    def __init__(self, ports: list[int], route: Callable[[dict[str, Any]], int] | None = None) -> None:
        self.ports = ports
        self.sent: list[tuple[int, str]] = []
        self.requests: list[httpx2.Request] = []
        self._turn = itertools.count()
        self._route = route
        self._inner = httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        message = json.loads(request.content) if request.content else {}
        port = self._route(message) if self._route else self.ports[next(self._turn) % len(self.ports)]
        self.sent.append((port, message.get("method", request.method)))
        self.requests.append(request)
        request.url = request.url.copy_with(port=port)
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


def sticky(port: int, answers: Any = None) -> Client:
    """A 2025-era client whose stateful session (Mcp-Session-Id, SSE) stays on one replica; ``answers`` is its
    elicitation callback (an Answers, or any callback)."""
    url = f"http://127.0.0.1:{port}/mcp"
    return Client(streamable_http_client(url), mode="legacy", elicitation_callback=answers)


@asynccontextmanager
async def spread(balancer: Balancer, answers: Answers | None = None) -> AsyncIterator[Client]:
    """A 2026-era client whose stateless requests go wherever the balancer sends them."""
    url = f"http://127.0.0.1:{balancer.ports[0]}/mcp"
    async with (
        httpx2.AsyncClient(transport=balancer) as http,
        Client(streamable_http_client(url, http_client=http), elicitation_callback=answers) as client,
    ):
        yield client


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "backend.db"


@pytest.fixture(params=["redis", "postgres"])
def shared_store(request: pytest.FixtureRequest) -> str:
    """The URL of an empty shared store: the session's Redis flushed, or a fresh schema on its PostgreSQL."""
    return str(request.getfixturevalue(f"{request.param}_url"))


def with_params(url: str, **params: Any) -> str:
    """The store URL with query parameters added."""
    return url + ("&" if "?" in url else "?") + "&".join(f"{name}={value}" for name, value in params.items())


def result_body(result: types.CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return dict(result.structured_content)


async def audit_outcomes(url: str) -> list[str]:
    store = open_store(url)
    try:
        return [entry.outcome async for entry in store.audit_entries()]
    finally:
        await store.close()


@pytest.mark.parametrize("workers", [1, 2])
async def test_a_plan_from_one_replica_is_redeemed_on_another_and_a_retry_on_a_third_replays(
    tmp_path: Path, db: Path, shared_store: str, workers: int
) -> None:
    """Also with each replica a ``serve --workers 2``, whose workers share the store as replicas do. A 2025-11-25
    session lives in one worker's memory and the kernel spreads a client's connections over the workers, so with
    workers only the stateless 2026-07-28 half runs (docs/deployment.md says so)."""
    backend = free_port()
    async with (
        http_backend(PROFILE, db, backend, *PROFILE.seed_demo),
        replicas(tmp_path, backend, shared_store, [KEY_NEW], 3, workers=workers) as group,
    ):
        ports = [replica.port for replica in group]
        a, b, c = ports
        version = PROFILE.version(db, PROFILE.main)
        on_b, on_c = Answers(), Answers()
        if workers == 1:
            async with sticky(a) as client:
                args = {"planId": (await preview(client, PROFILE))["planId"], "idempotencyKey": new_key()}
            async with sticky(b, on_b) as client:
                first = result_body(await client.call_tool(PROFILE.write_tool, args))
            async with sticky(c, on_c) as client:
                retry = result_body(await client.call_tool(PROFILE.write_tool, args))
            assert (first["replayed"], first["version"]) == (False, version + 1)
            assert retry == {**first, "replayed": True}
            assert (len(on_b.prompts), len(on_c.prompts)) == (1, 0)
            assert PROFILE.write_count(db) == 1
        sessions = 1 if workers == 1 else 0

        # 2026-07-28: every request, the confirmation round included, lands on whichever replica is next.
        balancer, answers = Balancer(ports), Answers()
        async with spread(balancer, answers) as client:
            plan = await preview(client, PROFILE, PROFILE.other)
            args = {"planId": plan["planId"], "idempotencyKey": new_key()}
            first = result_body(await client.call_tool(PROFILE.write_tool, args))
            retry = result_body(await client.call_tool(PROFILE.write_tool, args))
        assert retry == {**first, "replayed": True}
        assert len(answers.prompts) == 1
        assert len({port for port, method in balancer.sent if method == "tools/call"}) == 3
        assert PROFILE.write_count(db) == sessions + 1
    assert await audit_outcomes(shared_store) == ["applied", "replayed"] * (sessions + 1)


async def test_concurrent_calls_spread_over_replicas_write_once_per_key_and_per_target(
    tmp_path: Path, db: Path, shared_store: str
) -> None:
    backend = free_port()
    async with (
        http_backend(PROFILE, db, backend, *PROFILE.seed_demo, "--fault", "latency=300"),
        replicas(tmp_path, backend, shared_store, [KEY_NEW], 3) as group,
    ):
        ports = [replica.port for replica in group]
        async with sticky(ports[0]) as client:
            same_key = {"planId": (await preview(client, PROFILE))["planId"], "idempotencyKey": new_key()}
            rival_plans = [(await preview(client, PROFILE, PROFILE.other))["planId"] for _ in ports]
        results: list[types.CallToolResult] = []

        async def write(port: int, args: dict[str, str]) -> None:
            async with sticky(port, Answers()) as client:
                results.append(await client.call_tool(PROFILE.write_tool, args))

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tasks:
                for port in ports * 2:
                    tasks.start_soon(write, port, same_key)
        outcomes = sorted(error_code(r) if r.is_error else str(result_body(r)["replayed"]) for r in results)
        assert outcomes.count("False") == 1
        assert set(outcomes) <= {"False", "True", "request_in_progress"}, outcomes
        assert PROFILE.write_count(db) == 1

        # Three plans for one target at one version, each with its own key, each on its own replica.
        results.clear()
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tasks:
                for port, plan_id in zip(ports, rival_plans, strict=True):
                    tasks.start_soon(write, port, {"planId": plan_id, "idempotencyKey": new_key()})
        outcomes = sorted(error_code(r) if r.is_error else "applied" for r in results)
        assert outcomes == ["applied", "plan_stale", "plan_stale"]
        assert PROFILE.write_count(db) == 2


async def test_a_replica_killed_mid_write_leaves_its_key_unknown_and_another_replica_carries_on(
    tmp_path: Path, db: Path, shared_store: str
) -> None:
    backend, backend_log = free_port(), tmp_path / "backend.log"
    backend_args = [*PROFILE.seed_demo, "--fault", "latency=1500:1"]
    command = [sys.executable, "-m", PROFILE.backend_module, "--http", f"127.0.0.1:{backend}", "--db", str(db)]
    store = with_params(shared_store, lock_lease=SHORT_LEASE)  # a dead holder's lock lapses within seconds
    with backend_log.open("wb") as log:
        async with (
            process([*command, *backend_args], backend, stderr=log),
            replicas(tmp_path, backend, store, [KEY_NEW], 3, call_timeout=SHORT_CALL) as group,
        ):
            victim, survivor, other = (replica.port for replica in group)
            version = PROFILE.version(db, PROFILE.main)
            async with sticky(survivor) as client:
                args = {"planId": (await preview(client, PROFILE))["planId"], "idempotencyKey": new_key()}
            lost: list[Exception] = []

            async def doomed_call() -> None:
                try:
                    async with sticky(victim, Answers()) as client:
                        await client.call_tool(PROFILE.write_tool, args)
                except Exception as exc:  # its replica dies under it
                    lost.append(exc)

            async with anyio.create_task_group() as tasks:
                tasks.start_soon(doomed_call)
                await until(lambda: b"fault latency fired" in backend_log.read_bytes())  # the write was sent
                group[0].process.send_signal(signal.SIGKILL)
                assert PROFILE.write_count(db) == 0  # the backend still holds the write (1.5 s of latency)
            # The client tries to resume its stream on the dead replica (the retry hint) before giving up.
            assert lost

            async with sticky(survivor, Answers()) as client:
                with anyio.fail_after(30):
                    while True:  # request_in_progress until the dead replica's lock lapses
                        retry = await client.call_tool(PROFILE.write_tool, args)
                        if error_code(retry) != "request_in_progress":
                            break
                        await anyio.sleep(0.1)
            assert error_code(retry) == "outcome_unknown"
            await until(lambda: PROFILE.write_count(db) == 1)  # the backend finishes what the dead replica sent
            async with sticky(other, Answers()) as client:
                again = await client.call_tool(PROFILE.write_tool, args)
                plan = await preview(client, PROFILE, variant=1)
                carried_on = await client.call_tool(
                    PROFILE.write_tool, {"planId": plan["planId"], "idempotencyKey": new_key()}
                )
    assert error_code(again) == "outcome_unknown"
    assert result_body(carried_on)["version"] == version + 2
    assert PROFILE.write_count(db) == 2
    assert PROFILE.applied(db, PROFILE.main, PROFILE.choices[1])


@pytest.mark.parametrize("point", POINTS)
async def test_a_replica_crashing_at_any_step_never_leads_to_a_second_write_on_another(
    tmp_path: Path, db: Path, redis_url: str, point: str
) -> None:
    backend = free_port()
    async with (
        http_backend(PROFILE, db, backend, *PROFILE.seed_demo),
        replicas(
            tmp_path,
            backend,
            redis_url + f"?lock_lease={SHORT_LEASE}",
            [KEY_NEW],
            2,
            crash_first_at=point,
            call_timeout=SHORT_CALL,
        ) as group,
    ):
        crashing, survivor = group
        async with sticky(survivor.port) as client:
            args = {"planId": (await preview(client, PROFILE))["planId"], "idempotencyKey": new_key()}
        with anyio.fail_after(30):
            with contextlib.suppress(Exception):  # the replica dies under this call
                async with sticky(crashing.port, Answers()) as client:
                    await client.call_tool(PROFILE.write_tool, args)
            assert await anyio.to_thread.run_sync(crashing.process.wait) == 137
        writes_at_crash = PROFILE.write_count(db)
        assert writes_at_crash == (1 if point in ("after-backend-write", "before-settle") else 0)
        answers = Answers()
        async with sticky(survivor.port, answers) as client:
            with anyio.fail_after(30):
                while True:  # request_in_progress until the dead replica's lock lapses
                    retry = await client.call_tool(PROFILE.write_tool, args)
                    if not retry.is_error or error_code(retry) != "request_in_progress":
                        break
                    await anyio.sleep(0.1)
            again = await client.call_tool(PROFILE.write_tool, args)
    if point == "before-claim":
        # Nothing was claimed: the survivor waits out the dead replica's lock, asks, and applies once.
        assert result_body(retry)["replayed"] is False
        assert again.structured_content == {**result_body(retry), "replayed": True}
        assert len(answers.prompts) == 1
        assert PROFILE.write_count(db) == 1
    else:
        assert error_code(retry) == error_code(again) == "outcome_unknown"
        assert answers.prompts == []
        assert PROFILE.write_count(db) == writes_at_crash


async def test_replicas_sharing_a_rotated_key_ring_accept_state_and_cursors_minted_under_the_old_key(
    tmp_path: Path, db: Path, redis_url: str
) -> None:
    backend = free_port()
    rings = [KEY_OLD, f"{KEY_NEW},{KEY_OLD}", KEY_NEW]
    async with (
        http_backend(PROFILE, db, backend, *PROFILE.seed_demo),
        replicas(tmp_path, backend, redis_url, rings) as group,
    ):
        ports = [replica.port for replica in group]
        old, rotated, new_only = ports

        def on(port: int) -> Balancer:
            return Balancer(ports, lambda message: port)

        def retries_to(port: int) -> Balancer:
            """Everything on the old replica, except a confirmation retry (it carries requestState)."""
            return Balancer(ports, lambda message: port if "requestState" in message.get("params", {}) else old)

        async with spread(on(old)) as client:
            page = result_body(await client.call_tool(PROFILE.list_tool, {"limit": 2}))
        async with spread(on(rotated)) as client:
            arguments = {"limit": 2, "cursor": page["nextCursor"]}
            next_page = result_body(await client.call_tool(PROFILE.list_tool, arguments))
        async with spread(on(new_only)) as client:
            refused = await client.call_tool(PROFILE.list_tool, {"limit": 2, "cursor": page["nextCursor"]})
        first_id, last_id = (
            next_page[PROFILE.items_key][0][PROFILE.id_field],
            page[PROFILE.items_key][-1][PROFILE.id_field],
        )
        assert first_id > last_id
        assert error_code(refused) == "invalid_cursor"

        balancer = retries_to(rotated)
        async with spread(balancer, Answers()) as client:
            args = {"planId": (await preview(client, PROFILE))["planId"], "idempotencyKey": new_key()}
            applied = result_body(await client.call_tool(PROFILE.write_tool, args))
        assert applied["replayed"] is False
        assert (rotated, "tools/call") in balancer.sent
        assert PROFILE.write_count(db) == 1

        async with spread(retries_to(new_only), Answers()) as client:
            args = {"planId": (await preview(client, PROFILE, PROFILE.other))["planId"], "idempotencyKey": new_key()}
            with pytest.raises(MCPError) as refused_state:
                await client.call_tool(PROFILE.write_tool, args)
        assert refused_state.value.error.code == types.INVALID_PARAMS
        assert PROFILE.write_count(db) == 1


async def test_a_confirmation_answer_used_on_one_replica_cannot_be_replayed_on_another(
    tmp_path: Path, db: Path, shared_store: str
) -> None:
    backend = free_port()
    async with (
        http_backend(PROFILE, db, backend, *PROFILE.seed_demo),
        replicas(tmp_path, backend, shared_store, [KEY_NEW], 2) as group,
    ):
        first, second = (replica.port for replica in group)
        balancer = Balancer([first, second], lambda message: first)
        # A "no" that keeps the plan (a decline would use it up and end the story at plan_not_found).
        async with spread(balancer, Answers("accept", {"confirm": False})) as client:
            args = {"planId": (await preview(client, PROFILE))["planId"], "idempotencyKey": new_key()}
            declined = await client.call_tool(PROFILE.write_tool, args)
        # Replay the sealed state of that answered round on the other replica, the answer turned into a yes.
        answered = balancer.requests[-1]
        message = json.loads(answered.content)
        message["params"]["inputResponses"]["confirm"] = {"action": "accept", "content": {"confirm": True}}
        headers = {name: value for name, value in answered.headers.items() if name not in {"host", "content-length"}}
        async with httpx2.AsyncClient() as http:
            replayed = await http.post(f"http://127.0.0.1:{second}/mcp", headers=headers, json=message)
    assert error_code(declined) == "not_confirmed"
    assert replayed.json()["result"]["resultType"] == "input_required"  # asked again: the nonce was used
    assert PROFILE.write_count(db) == 0


async def test_an_approval_given_on_one_replica_reaches_the_write_waiting_on_another_within_a_second(
    tmp_path: Path, db: Path, shared_store: str
) -> None:
    def url_mode_with_approvers(data: dict[str, Any], port: int) -> None:
        url_mode(PROFILE.write_tool, timeout=60)(data["tools"])
        data["approvals"] = approvals_section(f"http://127.0.0.1:{port}")

    backend = free_port()
    decided: list[float] = []
    async with (
        http_backend(PROFILE, db, backend, *PROFILE.seed_demo),
        replicas(tmp_path, backend, shared_store, [KEY_NEW], 2, change=url_mode_with_approvers) as group,
        anyio.create_task_group() as background,
    ):
        waiting_on, page_on = (replica.port for replica in group)

        async def bob_approves_on_the_other_replica(approval_id: str) -> None:
            await anyio.sleep(1.0)  # the write is waiting on its replica by now
            headers = {"Authorization": f"Bearer {TOKENS['bob']}"}
            async with httpx2.AsyncClient(base_url=f"http://127.0.0.1:{page_on}", headers=headers) as http:
                answer = await http.post(f"/approvals/api/{approval_id}", json={"decision": "approve"})
            assert answer.status_code == 200, answer.text
            decided.append(time.monotonic())

        async def opens_the_link(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
            assert isinstance(params, types.ElicitRequestURLParams)
            background.start_soon(bob_approves_on_the_other_replica, params.url.rstrip("/").rsplit("/", 1)[1])
            return types.ElicitResult(action="accept")

        async with sticky(waiting_on, opens_the_link) as client:
            args = {"planId": (await preview(client, PROFILE))["planId"], "idempotencyKey": new_key()}
            with anyio.fail_after(60):
                applied = result_body(await client.call_tool(PROFILE.write_tool, args))
            answered = time.monotonic()
    assert applied["replayed"] is False
    assert PROFILE.write_count(db) == 1
    assert len(decided) == 1 and answered - decided[0] < 1.5  # the waiting replica polls the store twice a second


async def test_a_redis_outage_refuses_before_anything_is_sent_and_keys_survive_a_redis_restart(
    tmp_path: Path, db: Path
) -> None:
    port, data = free_port(), tmp_path / "redis"
    url = f"redis://127.0.0.1:{port}/0"
    config = gateway_config(PROFILE, db, *PROFILE.seed_demo, store=url, state_dir=tmp_path)
    answers = Answers()
    with contextlib.ExitStack() as first_run:
        first_run.enter_context(redis_process(data, port, aof=True))
        async with running_gateway(config) as gw, connect(gw, "2025-11-25", answers) as client:
            args = {"planId": (await preview(client, PROFILE))["planId"], "idempotencyKey": new_key()}
            first_run.close()  # SIGKILL: only what the append-only file holds survives
            down = await client.call_tool(PROFILE.write_tool, args)
            with redis_process(data, port, aof=True):
                applied = result_body(await client.call_tool(PROFILE.write_tool, args))
            with redis_process(data, port, aof=True):
                replayed = result_body(await client.call_tool(PROFILE.write_tool, args))
    assert error_code(down) == "store_unavailable"
    assert (applied["replayed"], replayed) == (False, {**applied, "replayed": True})
    assert len(answers.prompts) == 1
    assert PROFILE.write_count(db) == 1
