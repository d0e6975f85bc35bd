"""An unreliable backend: each fault ends in a clear code, and no key ever writes twice."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from tests.conftest import (
    ERAS,
    Answers,
    connect,
    error_code,
    free_port,
    gateway_config,
    http_backend,
    new_key,
    preview,
    running_gateway,
    tenant_state,
    write_count,
)

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("era", ERAS)
async def test_commit_then_drop_is_outcome_unknown_and_a_retry_never_writes_again(tmp_path: Path, era: str) -> None:
    db = tmp_path / "legacy.db"
    config = gateway_config(db, "--seed-demo", "--fault", "drop-after-write:1", state_dir=tmp_path)
    async with running_gateway(config) as gw, connect(gw, era, Answers()) as client:
        version, _ = tenant_state(db, "tn_checkout01")
        args = {"planId": (await preview(client))["planId"], "idempotencyKey": new_key()}
        first = await client.call_tool("reset_tenant", args)
        retry = await client.call_tool("reset_tenant", args)
        connects = gw.backend.connects
    assert error_code(first) == "outcome_unknown"
    assert error_code(retry) == "outcome_unknown"
    assert write_count(db) == 1
    assert tenant_state(db, "tn_checkout01") == (version + 1, 0)
    assert connects >= 2  # the dead stdio child was respawned to re-read the target
    import json

    details = json.loads(retry.content[0].text)["details"]  # type: ignore[union-attr]
    assert details["current"]["version"] == version + 1


@pytest.mark.parametrize("era", ERAS)
async def test_a_malformed_result_after_the_write_is_reported_as_success(tmp_path: Path, era: str) -> None:
    db = tmp_path / "legacy.db"
    config = gateway_config(db, "--seed-demo", "--fault", "malformed-after-write", state_dir=tmp_path)
    answers = Answers()
    async with running_gateway(config) as gw, connect(gw, era, answers) as client:
        version, rows = tenant_state(db, "tn_checkout01")
        args = {"planId": (await preview(client, fixture="smoke"))["planId"], "idempotencyKey": new_key()}
        first = await client.call_tool("reset_tenant", args)
        retry = await client.call_tool("reset_tenant", args)
    assert not first.is_error, first.content
    assert first.structured_content == {
        "planId": args["planId"],
        "tenantId": "tn_checkout01",
        "fixture": "smoke",
        "rowsDeleted": rows,
        "rowsInserted": 25,
        "version": version + 1,
        "replayed": False,
    }
    assert retry.structured_content == {**first.structured_content, "replayed": True}
    assert write_count(db) == 1
    assert len(answers.prompts) == 1


async def test_a_backend_refusal_is_backend_error_and_replays(tmp_path: Path) -> None:
    db = tmp_path / "legacy.db"
    config = gateway_config(db, "--seed-demo", "--fault", "fail-before-write", state_dir=tmp_path)
    async with running_gateway(config) as gw, connect(gw, "2025-11-25", Answers()) as client:
        before = tenant_state(db, "tn_checkout01")
        plan_id = (await preview(client))["planId"]
        args = {"planId": plan_id, "idempotencyKey": new_key()}
        first = await client.call_tool("reset_tenant", args)
        retry = await client.call_tool("reset_tenant", args)
        fresh_key = await client.call_tool("reset_tenant", {"planId": plan_id, "idempotencyKey": new_key()})
        outcomes = [entry.outcome async for entry in gw.store.audit_entries()]
    assert error_code(first) == "backend_error"
    assert error_code(retry) == "backend_error"
    assert error_code(fresh_key) == "plan_not_found"  # the plan was used up by the failed write
    assert write_count(db) == 0
    assert tenant_state(db, "tn_checkout01") == before
    assert outcomes == ["backend_error", "backend_error", "refused"]


async def test_a_write_that_times_out_is_outcome_unknown_and_never_repeated(tmp_path: Path) -> None:
    db = tmp_path / "legacy.db"
    config = gateway_config(
        db, "--seed-demo", "--fault", "latency=2500", state_dir=tmp_path, backend={"call_timeout_seconds": 1}
    )
    async with running_gateway(config) as gw, connect(gw, "2026-07-28", Answers()) as client:
        args = {"planId": (await preview(client))["planId"], "idempotencyKey": new_key()}
        first = await client.call_tool("reset_tenant", args)
        retry = await client.call_tool("reset_tenant", args)
    assert error_code(first) == "outcome_unknown"
    assert error_code(retry) == "outcome_unknown"
    assert write_count(db) <= 1


async def test_a_backend_known_down_is_unavailable_and_the_same_key_works_later(tmp_path: Path) -> None:
    db, port = tmp_path / "legacy.db", free_port()
    config = gateway_config(
        db, state_dir=tmp_path, backend={"transport": "http", "url": f"http://127.0.0.1:{port}/mcp"}
    )
    first_run = http_backend(db, port, "--seed-demo")
    await first_run.__aenter__()
    try:
        async with running_gateway(config) as gw, connect(gw, "2025-11-25", Answers()) as client:
            args = {"planId": (await preview(client))["planId"], "idempotencyKey": new_key()}
            await first_run.__aexit__(None, None, None)
            down = await client.call_tool("reset_tenant", args)
            assert error_code(down) == "backend_unavailable"
            assert write_count(db) == 0
            async with http_backend(db, port):
                later = await client.call_tool("reset_tenant", args)
    finally:
        await first_run.__aexit__(None, None, None)
    assert not later.is_error, later.content
    assert later.structured_content is not None and later.structured_content["replayed"] is False
    assert write_count(db) == 1


async def test_an_http_backend_that_commits_then_dies_is_outcome_unknown(tmp_path: Path) -> None:
    db, port = tmp_path / "legacy.db", free_port()
    config = gateway_config(
        db, state_dir=tmp_path, backend={"transport": "http", "url": f"http://127.0.0.1:{port}/mcp"}
    )
    async with (
        http_backend(db, port, "--seed-demo", "--fault", "drop-after-write:1"),
        running_gateway(config) as gw,
        connect(gw, "2025-11-25", Answers()) as client,
    ):
        args = {"planId": (await preview(client))["planId"], "idempotencyKey": new_key()}
        with anyio.fail_after(30):
            first = await client.call_tool("reset_tenant", args)
        assert error_code(first) == "outcome_unknown"
        assert write_count(db) == 1
        async with http_backend(db, port):
            retry = await client.call_tool("reset_tenant", args)
            listed = await client.call_tool("list_tenants", {})
    assert error_code(retry) == "outcome_unknown"
    assert not listed.is_error  # the gateway reconnected to the restarted backend
    assert write_count(db) == 1
