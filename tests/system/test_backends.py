"""One real gateway (`serve` over HTTP) over two real backends (the demo backend and the flags backend, each its
own process over streamable HTTP), with a pass-through read and a confirmed pass-through write: both god-tools'
writes in both eras, then one backend stopped (the other's tools keep working), then restarted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.support.clients import ERAS, Answers, applied_body, error_code, new_key, preview, until_reachable
from tests.support.configs import together_data, write_toml
from tests.support.processes import free_port, http_backend, serve
from tests.support.profiles import FLAGS, TENANTS, Profile

pytestmark = pytest.mark.anyio


def client(url: str, era: str, answers: Answers | None = None) -> Client:
    if era == "2025-11-25":
        return Client(streamable_http_client(url), mode="legacy", elicitation_callback=answers)
    return Client(url, elicitation_callback=answers)


async def planned_write(session: Client, profile: Profile, db: Path, target: str) -> None:
    version = profile.version(db, target)
    plan = await preview(session, profile, target=target, variant=1)
    result = await session.call_tool(profile.write_tool, {"planId": plan["planId"], "idempotencyKey": new_key()})
    assert result.structured_content == applied_body(plan, version + 1), result.content


async def test_one_gateway_serves_two_backends_and_outlives_one_of_them(tmp_path: Path) -> None:
    tenants_db, flags_db = tmp_path / "tenants.db", tmp_path / "flags.db"
    tenants_port, flags_port, port = free_port(), free_port(), free_port()
    http: dict[str, dict[str, Any]] = {
        "tenants": {"transport": "http", "url": f"http://127.0.0.1:{tenants_port}/mcp"},
        "flags": {"transport": "http", "url": f"http://127.0.0.1:{flags_port}/mcp", "connect_timeout_seconds": 5},
    }
    data = together_data(
        TENANTS, tenants_db, state_dir=tmp_path / "state", store=f"sqlite:{tmp_path}/gateway.db", backends=http
    )
    config = write_toml(data, tmp_path / "gateway.toml")
    url, base = f"http://127.0.0.1:{port}/mcp", f"http://127.0.0.1:{port}"
    async with http_backend(TENANTS, tenants_db, tenants_port, *TENANTS.seed_demo), serve(config, port):
        async with http_backend(FLAGS, flags_db, flags_port, *FLAGS.seed_demo):
            async with client(url, "2026-07-28") as session:  # started after the gateway: picked up within seconds
                await until_reachable(lambda: session.call_tool(FLAGS.list_tool, {}))
            for era, (tenant, flag) in zip(
                ERAS, [(TENANTS.main, FLAGS.main), (TENANTS.other, FLAGS.other)], strict=True
            ):
                answers = Answers()
                async with client(url, era, answers) as session:
                    await planned_write(session, TENANTS, tenants_db, tenant)
                    await planned_write(session, FLAGS, flags_db, flag)
                    history = await session.call_tool("flag_history", {"key": flag})
                    described = await session.call_tool(
                        "describe_flag", {"key": flag, "description": f"via {era}", "idempotencyKey": new_key()}
                    )
                assert history.structured_content is not None and history.structured_content["writes"] >= 1
                assert described.structured_content is not None, described.content
                assert described.structured_content["flag"]["description"] == f"via {era}"
                assert len(answers.prompts) == 3  # two planned writes and the pass-through write
            assert TENANTS.write_count(tenants_db) == 2 and FLAGS.write_count(flags_db) == 4
        # The flags backend is stopped: its tools answer backend_unavailable, the tenants' tools still work.
        async with client(url, "2026-07-28", Answers()) as session:
            await planned_write(session, TENANTS, tenants_db, TENANTS.spare)
            page = await session.call_tool(FLAGS.list_tool, {})
            described = await session.call_tool(
                "describe_flag", {"key": FLAGS.spare, "description": "while down", "idempotencyKey": new_key()}
            )
            assert error_code(page) == "backend_unavailable"
            assert error_code(described) == "backend_unavailable"
            async with httpx.AsyncClient() as plain:
                ready = await plain.get(f"{base}/readyz")
                metrics = (await plain.get(f"{base}/metrics")).text
            assert ready.status_code == 200
            assert ready.json()["backends"] == {"tenants": "up", "flags": "down"}
            assert 'gateway_backend_connected{backend="flags"} 0.0' in metrics
            assert 'gateway_backend_connected{backend="tenants"} 1.0' in metrics
            assert FLAGS.write_count(flags_db) == 4 and TENANTS.write_count(tenants_db) == 3
            # Restarted, the flags backend's tools come back without restarting the gateway.
            async with http_backend(FLAGS, flags_db, flags_port):
                page = await until_reachable(lambda: session.call_tool(FLAGS.list_tool, {}))
                await planned_write(session, FLAGS, flags_db, FLAGS.spare)
    assert not page.is_error, page.content
    assert FLAGS.write_count(flags_db) == 5
