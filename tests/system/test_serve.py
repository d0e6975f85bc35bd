"""`mcp-safety-gateway serve` as a real process, over real HTTP and stdio, in front of a real backend."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from gateway.config import DEFAULT_CONFIG
from tests.support.approvals import token_page_data
from tests.support.clients import Answers, applied_body, error_code, new_key, preview
from tests.support.configs import write_config, write_toml
from tests.support.processes import free_port, serve
from tests.support.profiles import TENANTS, Profile

pytestmark = pytest.mark.anyio


async def test_the_full_flow_over_http_in_both_eras(tmp_path: Path, profile: Profile) -> None:
    config, port = write_config(profile, tmp_path), free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    db = tmp_path / "backend.db"
    log = tmp_path / "gateway.log"
    with log.open("w") as stderr:
        async with serve(config, port, stderr=stderr):
            await _full_flow(profile, port, url, db)
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    calls = [line for line in lines if line["logger"] == "gateway.calls"]
    assert {line["outcome"] for line in calls} >= {"ok", "applied", "replayed", "input_required", "not_confirmed"}
    assert all({"request_id", "caller", "tool", "ms"} <= set(line) for line in calls)


async def _full_flow(profile: Profile, port: int, url: str, db: Path) -> None:
    """Health, both eras' preview -> reset -> retry, a decline, and the metrics that counted them."""
    async with httpx.AsyncClient() as http:
        assert (await http.get(f"http://127.0.0.1:{port}/healthz")).status_code == 200
        ready = (await http.get(f"http://127.0.0.1:{port}/readyz")).json()
        assert ready == {"backend": "up", "backends": {"default": "up"}, "store": "up"}
    # 2025-11-25: stateful streamable HTTP, the prompt pushed over SSE.
    legacy_answers = Answers()
    async with Client(streamable_http_client(url), mode="legacy", elicitation_callback=legacy_answers) as client:
        version = profile.version(db, profile.main)
        plan = await preview(client, profile)
        args = {"planId": plan["planId"], "idempotencyKey": new_key()}
        first = await client.call_tool(profile.write_tool, args)
        retry = await client.call_tool(profile.write_tool, args)
    assert first.structured_content == applied_body(plan, version + 1)
    assert retry.structured_content == applied_body(plan, version + 1, replayed=True)
    assert len(legacy_answers.prompts) == 1
    assert profile.write_count(db) == 1
    # 2026-07-28: stateless requests, the prompt as an InputRequiredResult round.
    modern_answers = Answers()
    async with Client(url, elicitation_callback=modern_answers) as client:
        plan = await preview(client, profile, target=profile.other)
        args = {"planId": plan["planId"], "idempotencyKey": new_key()}
        first = await client.call_tool(profile.write_tool, args)
        retry = await client.call_tool(profile.write_tool, args)
    async with Client(url, elicitation_callback=Answers("decline")) as client:
        declined = await client.call_tool(
            profile.write_tool, {"planId": (await preview(client, profile))["planId"], "idempotencyKey": new_key()}
        )
    assert first.structured_content is not None and first.structured_content[profile.target_arg] == profile.other
    assert retry.structured_content == {**first.structured_content, "replayed": True}
    assert len(modern_answers.prompts) == 1
    assert error_code(declined) == "not_confirmed"
    assert profile.write_count(db) == 2
    async with httpx.AsyncClient() as http:
        metrics = (await http.get(f"http://127.0.0.1:{port}/metrics")).text
    write = profile.write_tool
    assert f'gateway_tool_calls_total{{outcome="applied",tool="{write}"}} 2.0' in metrics
    assert f'gateway_tool_calls_total{{outcome="replayed",tool="{write}"}} 2.0' in metrics
    assert f'gateway_tool_calls_total{{outcome="not_confirmed",tool="{write}"}} 1.0' in metrics
    assert "gateway_backend_call_seconds_count{action=" in metrics
    assert 'gateway_store_seconds_count{operation="claim"}' in metrics


async def test_the_full_flow_over_stdio(tmp_path: Path, profile: Profile) -> None:
    config = write_config(profile, tmp_path)
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "gateway", "serve", "--stdio", "--config", str(config)]
    )
    answers = Answers()
    with (tmp_path / "stderr.log").open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode="legacy", elicitation_callback=answers) as client:
            args = {"planId": (await preview(client, profile))["planId"], "idempotencyKey": new_key()}
            first = await client.call_tool(profile.write_tool, args)
            retry = await client.call_tool(profile.write_tool, args)
    assert first.structured_content is not None and first.structured_content["replayed"] is False
    assert retry.structured_content == {**first.structured_content, "replayed": True}
    assert len(answers.prompts) == 1
    assert profile.write_count(tmp_path / "backend.db") == 1


async def test_a_completed_key_replays_after_a_gateway_restart_on_the_same_store(
    tmp_path: Path, profile: Profile
) -> None:
    config = write_config(profile, tmp_path)
    url_of = "http://127.0.0.1:{}/mcp".format
    db = tmp_path / "backend.db"
    port = free_port()
    async with (
        serve(config, port),
        Client(streamable_http_client(url_of(port)), mode="legacy", elicitation_callback=Answers()) as client,
    ):
        args = {"planId": (await preview(client, profile))["planId"], "idempotencyKey": new_key()}
        first = await client.call_tool(profile.write_tool, args)
    assert first.structured_content is not None
    state_after_first = profile.snapshot(db, profile.main)
    port = free_port()
    answers = Answers()
    async with (
        serve(config, port),
        Client(streamable_http_client(url_of(port)), mode="legacy", elicitation_callback=answers) as client,
    ):
        retry = await client.call_tool(profile.write_tool, args)
    assert retry.structured_content == {**first.structured_content, "replayed": True}
    assert answers.prompts == []
    assert profile.write_count(db) == 1
    assert profile.snapshot(db, profile.main) == state_after_first


def test_serve_refuses_a_non_loopback_address_without_auth() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "gateway", "serve", "--host", "0.0.0.0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "refusing to listen on 0.0.0.0" in done.stderr


async def test_serve_warns_when_approval_links_point_at_another_local_port(tmp_path: Path) -> None:
    port = free_port()
    data = token_page_data(TENANTS, tmp_path, "http://127.0.0.1:8080")  # init's public_url, served elsewhere
    log = tmp_path / "gateway.log"
    with log.open("w") as stderr:
        async with serve(write_toml(data, tmp_path / "gateway.toml"), port, stderr=stderr):
            pass
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    warned = [line["msg"] for line in lines if line["level"] == "warning" and "approvals.public_url" in line["msg"]]
    assert len(warned) == 1 and "8080" in warned[0] and str(port) in warned[0], warned


@pytest.mark.parametrize("port", ["99999", "-1", "http"])
def test_a_port_that_cannot_be_is_refused_in_one_sentence(port: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "gateway", "serve", "--port", port], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    [said] = [line for line in done.stderr.splitlines() if "error:" in line]
    assert "--port" in said and port in said and "0-65535" in said, done.stderr


def test_a_bad_config_fails_at_start_naming_the_key(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(DEFAULT_CONFIG.read_text().replace('confirm = "form"', 'confirm = "maybe"'))
    done = subprocess.run(
        [sys.executable, "-m", "gateway", "serve", "--config", str(bad)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert "tools.reset_tenant.confirm" in done.stderr
    assert "Traceback" not in done.stderr
