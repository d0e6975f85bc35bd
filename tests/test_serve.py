"""`mcp-safety-gateway serve` as a real process, over real HTTP and stdio, in front of a real backend."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from gateway.config import DEFAULT_CONFIG
from tests.conftest import Answers, error_code, free_port, new_key, preview, process, tenant_state, write_count

pytestmark = pytest.mark.anyio


def write_config(tmp: Path, store: str = "sqlite") -> Path:
    """The default config, with the backend's database, the store and the state kept under ``tmp``."""
    text = DEFAULT_CONFIG.read_text()
    text = text.replace('store = "sqlite:var/gateway.db"', f'store = "sqlite:{tmp}/gateway.db"')
    text = text.replace('state_dir = "var"', f'state_dir = "{tmp}/state"')
    text = text.replace('command = "legacy-backend"', f'command = "{sys.executable}"')
    text = text.replace(
        'args = ["--stdio", "--db", "var/legacy.db"',
        f'args = ["-m", "legacy_backend", "--stdio", "--db", "{tmp}/legacy.db"',
    )
    assert text.count(str(tmp)) == 3, "the default config changed shape; update write_config"
    path = tmp / "gateway.toml"
    path.write_text(text)
    return path


def serve(config: Path, port: int) -> Any:
    args = [sys.executable, "-m", "gateway", "serve", "--config", str(config), "--port", str(port)]
    return process(args, port, stderr=subprocess.DEVNULL)


async def test_the_full_flow_over_http_in_both_eras(tmp_path: Path) -> None:
    config, port = write_config(tmp_path), free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    db = tmp_path / "legacy.db"
    async with serve(config, port):
        async with httpx.AsyncClient() as http:
            assert (await http.get(f"http://127.0.0.1:{port}/healthz")).status_code == 200
            assert (await http.get(f"http://127.0.0.1:{port}/readyz")).json() == {"backend": "up"}
        # 2025-11-25: stateful streamable HTTP, the prompt pushed over SSE.
        legacy_answers = Answers()
        async with Client(streamable_http_client(url), mode="legacy", elicitation_callback=legacy_answers) as client:
            args = {"planId": (await preview(client))["planId"], "idempotencyKey": new_key()}
            first = await client.call_tool("reset_tenant", args)
            retry = await client.call_tool("reset_tenant", args)
        assert first.structured_content is not None and first.structured_content["replayed"] is False
        assert retry.structured_content == {**first.structured_content, "replayed": True}
        assert len(legacy_answers.prompts) == 1
        assert write_count(db) == 1
        # 2026-07-28: stateless requests, the prompt as an InputRequiredResult round.
        modern_answers = Answers()
        async with Client(url, elicitation_callback=modern_answers) as client:
            args = {"planId": (await preview(client, tenant_id="tn_search02"))["planId"], "idempotencyKey": new_key()}
            first = await client.call_tool("reset_tenant", args)
            retry = await client.call_tool("reset_tenant", args)
        async with Client(url, elicitation_callback=Answers("decline")) as client:
            declined = await client.call_tool(
                "reset_tenant", {"planId": (await preview(client))["planId"], "idempotencyKey": new_key()}
            )
        assert first.structured_content is not None and first.structured_content["tenantId"] == "tn_search02"
        assert retry.structured_content == {**first.structured_content, "replayed": True}
        assert len(modern_answers.prompts) == 1
        assert error_code(declined) == "not_confirmed"
        assert write_count(db) == 2


async def test_the_full_flow_over_stdio(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "gateway", "serve", "--stdio", "--config", str(config)]
    )
    answers = Answers()
    with (tmp_path / "stderr.log").open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode="legacy", elicitation_callback=answers) as client:
            args = {"planId": (await preview(client))["planId"], "idempotencyKey": new_key()}
            first = await client.call_tool("reset_tenant", args)
            retry = await client.call_tool("reset_tenant", args)
    assert first.structured_content is not None and first.structured_content["replayed"] is False
    assert retry.structured_content == {**first.structured_content, "replayed": True}
    assert len(answers.prompts) == 1
    assert write_count(tmp_path / "legacy.db") == 1


async def test_a_completed_key_replays_after_a_gateway_restart_on_the_same_store(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    url_of = "http://127.0.0.1:{}/mcp".format
    db = tmp_path / "legacy.db"
    port = free_port()
    async with (
        serve(config, port),
        Client(streamable_http_client(url_of(port)), mode="legacy", elicitation_callback=Answers()) as client,
    ):
        args = {"planId": (await preview(client))["planId"], "idempotencyKey": new_key()}
        first = await client.call_tool("reset_tenant", args)
    assert first.structured_content is not None
    state_after_first = tenant_state(db, "tn_checkout01")
    port = free_port()
    answers = Answers()
    async with (
        serve(config, port),
        Client(streamable_http_client(url_of(port)), mode="legacy", elicitation_callback=answers) as client,
    ):
        retry = await client.call_tool("reset_tenant", args)
    assert retry.structured_content == {**first.structured_content, "replayed": True}
    assert answers.prompts == []
    assert write_count(db) == 1
    assert tenant_state(db, "tn_checkout01") == state_after_first


def test_serve_refuses_a_non_loopback_address_without_auth(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "gateway", "serve", "--config", str(config), "--host", "0.0.0.0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "refusing to listen on 0.0.0.0" in done.stderr


def test_a_bad_config_fails_at_start_naming_the_key(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(DEFAULT_CONFIG.read_text().replace('confirm = "boolean"', 'confirm = "maybe"'))
    done = subprocess.run(
        [sys.executable, "-m", "gateway", "serve", "--config", str(bad)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert "tools.reset_tenant.confirm" in done.stderr
    assert "Traceback" not in done.stderr
