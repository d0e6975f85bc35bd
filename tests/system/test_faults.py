"""An unreliable backend: each fault ends in a clear code, and no key ever writes twice."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from gateway.backend.client import McpBackend
from tests.support.clients import (
    ERAS,
    Answers,
    applied_body,
    connect,
    error_body,
    error_code,
    new_key,
    preview,
    running_gateway,
    until_reachable,
)
from tests.support.configs import gateway_config
from tests.support.processes import free_port, http_backend
from tests.support.profiles import Profile

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("era", ERAS)
async def test_commit_then_drop_is_outcome_unknown_and_a_retry_never_writes_again(
    tmp_path: Path, profile: Profile, era: str
) -> None:
    db = tmp_path / "backend.db"
    config = gateway_config(profile, db, *profile.seed_demo, "--fault", "drop-after-write:1", state_dir=tmp_path)
    async with running_gateway(config) as gw, connect(gw, era, Answers()) as client:
        version = profile.version(db, profile.main)
        args = {"planId": (await preview(client, profile))["planId"], "idempotencyKey": new_key()}
        first = await client.call_tool(profile.write_tool, args)
        retry = await client.call_tool(profile.write_tool, args)
        backend = gw.backends["default"]
        assert isinstance(backend, McpBackend)
        connects = backend.connects
    assert error_code(first) == "outcome_unknown"
    assert error_code(retry) == "outcome_unknown"
    assert profile.write_count(db) == 1
    assert profile.version(db, profile.main) == version + 1
    assert connects >= 2  # the dead stdio child was respawned to re-read the target
    current = error_body(retry)["details"]["current"]
    assert current is not None and current != {}


KEY_ANSWERS = {"outcome_unknown", "request_in_progress"}


@pytest.mark.parametrize("store", ["memory", "sqlite", "redis"])
async def test_a_same_key_race_whose_answer_is_dropped_gets_only_key_answers(
    tmp_path: Path, profile: Profile, store: str, request: pytest.FixtureRequest
) -> None:
    """32 concurrent calls with one plan and one key while the backend's answer is dropped: exactly one write,
    and every answer speaks of the key (never plan_stale, which would invite a preview and a second write)."""
    db = tmp_path / "backend.db"
    where = {"memory": "memory", "sqlite": f"sqlite:{tmp_path}/gateway.db"}.get(store)
    if where is None:
        where = request.getfixturevalue("redis_url")
    faults = ("--fault", "drop-after-write:1")
    config = gateway_config(profile, db, *profile.seed_demo, *faults, store=where, state_dir=tmp_path / "state")
    answers: list[Any] = []
    async with running_gateway(config) as gw, connect(gw, "2025-11-25", Answers()) as client:
        args = {"planId": (await preview(client, profile))["planId"], "idempotencyKey": new_key()}

        async def call() -> None:
            answers.append(await client.call_tool(profile.write_tool, args))

        async with anyio.create_task_group() as group:
            for _ in range(32):
                group.start_soon(call)
    codes = sorted({error_code(answer) if answer.is_error else "applied" for answer in answers})
    assert set(codes) <= KEY_ANSWERS, codes
    assert profile.write_count(db) == 1


@pytest.mark.parametrize("era", ERAS)
async def test_a_malformed_result_after_the_write_is_reported_as_success(
    tmp_path: Path, profile: Profile, era: str
) -> None:
    db = tmp_path / "backend.db"
    config = gateway_config(profile, db, *profile.seed_demo, "--fault", "malformed-after-write", state_dir=tmp_path)
    answers = Answers()
    async with running_gateway(config) as gw, connect(gw, era, answers) as client:
        version = profile.version(db, profile.main)
        plan = await preview(client, profile, variant=1)
        args = {"planId": plan["planId"], "idempotencyKey": new_key()}
        first = await client.call_tool(profile.write_tool, args)
        retry = await client.call_tool(profile.write_tool, args)
    assert not first.is_error, first.content
    assert first.structured_content == applied_body(plan, version + 1)
    assert retry.structured_content == applied_body(plan, version + 1, replayed=True)
    assert profile.write_count(db) == 1
    assert profile.applied(db, profile.main, profile.choices[1])
    assert len(answers.prompts) == 1


async def test_a_backend_refusal_is_backend_error_and_replays(tmp_path: Path, profile: Profile) -> None:
    db = tmp_path / "backend.db"
    config = gateway_config(profile, db, *profile.seed_demo, "--fault", "fail-before-write", state_dir=tmp_path)
    async with running_gateway(config) as gw, connect(gw, "2025-11-25", Answers()) as client:
        before = profile.snapshot(db, profile.main)
        plan_id = (await preview(client, profile))["planId"]
        args = {"planId": plan_id, "idempotencyKey": new_key()}
        first = await client.call_tool(profile.write_tool, args)
        retry = await client.call_tool(profile.write_tool, args)
        fresh_key = await client.call_tool(profile.write_tool, {"planId": plan_id, "idempotencyKey": new_key()})
        outcomes = [entry.outcome async for entry in gw.store.audit_entries()]
    assert error_code(first) == "backend_error"
    assert error_code(retry) == "backend_error"
    assert error_code(fresh_key) == "plan_not_found"  # the plan was used up by the failed write
    assert profile.write_count(db) == 0
    assert profile.snapshot(db, profile.main) == before
    assert outcomes == ["backend_error", "backend_error", "refused"]


@pytest.mark.parametrize("timeout_from", ["backend", "action"])
async def test_a_write_that_times_out_is_outcome_unknown_and_never_repeated(
    tmp_path: Path, profile: Profile, timeout_from: str
) -> None:
    db = tmp_path / "backend.db"

    def short_write_timeout(tools: dict[str, Any]) -> None:
        tools[profile.write_tool]["call"]["timeout_seconds"] = 1

    config = gateway_config(
        profile,
        db,
        *profile.seed_demo,
        "--fault",
        "latency=2500",
        state_dir=tmp_path,
        backend={"call_timeout_seconds": 1 if timeout_from == "backend" else 20},
        tools=short_write_timeout if timeout_from == "action" else None,
    )
    async with running_gateway(config) as gw, connect(gw, "2026-07-28", Answers()) as client:
        args = {"planId": (await preview(client, profile))["planId"], "idempotencyKey": new_key()}
        first = await client.call_tool(profile.write_tool, args)
        retry = await client.call_tool(profile.write_tool, args)
    assert error_code(first) == "outcome_unknown"
    assert error_code(retry) == "outcome_unknown"
    assert profile.write_count(db) <= 1


async def test_a_backend_known_down_is_unavailable_and_the_same_key_works_later(
    tmp_path: Path, profile: Profile
) -> None:
    db, port = tmp_path / "backend.db", free_port()
    config = gateway_config(
        profile, db, state_dir=tmp_path, backend={"transport": "http", "url": f"http://127.0.0.1:{port}/mcp"}
    )
    first_run = http_backend(profile, db, port, *profile.seed_demo)
    await first_run.__aenter__()
    stopped = False
    try:
        async with running_gateway(config) as gw, connect(gw, "2025-11-25", Answers()) as client:
            args = {"planId": (await preview(client, profile))["planId"], "idempotencyKey": new_key()}
            await first_run.__aexit__(None, None, None)
            stopped = True
            down = await client.call_tool(profile.write_tool, args)
            assert error_code(down) == "backend_unavailable"
            assert profile.write_count(db) == 0
            async with http_backend(profile, db, port):
                later = await until_reachable(lambda: client.call_tool(profile.write_tool, args))
    finally:
        if not stopped:
            await first_run.__aexit__(None, None, None)
    assert not later.is_error, later.content
    assert later.structured_content is not None and later.structured_content["replayed"] is False
    assert profile.write_count(db) == 1


async def test_an_http_backend_that_commits_then_dies_is_outcome_unknown(tmp_path: Path, profile: Profile) -> None:
    db, port = tmp_path / "backend.db", free_port()
    config = gateway_config(
        profile, db, state_dir=tmp_path, backend={"transport": "http", "url": f"http://127.0.0.1:{port}/mcp"}
    )
    async with (
        http_backend(profile, db, port, *profile.seed_demo, "--fault", "drop-after-write:1"),
        running_gateway(config) as gw,
        connect(gw, "2025-11-25", Answers()) as client,
    ):
        args = {"planId": (await preview(client, profile))["planId"], "idempotencyKey": new_key()}
        with anyio.fail_after(30):
            first = await client.call_tool(profile.write_tool, args)
        assert error_code(first) == "outcome_unknown"
        assert profile.write_count(db) == 1
        async with http_backend(profile, db, port):
            retry = await until_reachable(lambda: client.call_tool(profile.write_tool, args))
            listed = await until_reachable(lambda: client.call_tool(profile.list_tool, {}))
    assert error_code(retry) == "outcome_unknown"
    assert not listed.is_error  # the gateway reconnected to the restarted backend
    assert profile.write_count(db) == 1


async def test_a_backend_that_cannot_start_is_unavailable_and_retried_with_backoff(
    tmp_path: Path, profile: Profile
) -> None:
    from gateway.runtime import open_gateway

    config = gateway_config(
        profile, tmp_path / "backend.db", state_dir=tmp_path, backend={"args": ["-m", "no_such_module"]}
    )
    async with open_gateway(config) as gw, connect(gw, "2025-11-25") as client:
        listed = {tool.name for tool in (await client.list_tools()).tools}
        backend = gw.backends["default"]
        assert isinstance(backend, McpBackend)
        attempts = backend.connect_attempts
        assert not await backend.probe()  # within the backoff window: refused without a new spawn
        assert backend.connect_attempts == attempts
        page = await client.call_tool(profile.list_tool, {})
        plan = await client.call_tool(profile.preview_tool, profile.preview_args())
    # No tool of a backend that is down is listed, and every call answers backend_unavailable.
    assert listed == set()
    assert error_code(page) == "backend_unavailable"
    assert error_code(plan) == "backend_unavailable"


async def test_an_oversized_backend_answer_is_refused_as_malformed(tmp_path: Path, profile: Profile) -> None:
    db = tmp_path / "backend.db"
    config = gateway_config(profile, db, *profile.seed_many(50), state_dir=tmp_path, backend={"max_result_bytes": 2000})
    async with running_gateway(config) as gw, connect(gw, "2026-07-28") as client:
        result = await client.call_tool(profile.list_tool, {})
    assert error_code(result) == "backend_error"
