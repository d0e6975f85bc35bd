"""While the shared store is down (Redis, or PostgreSQL), every tool answers the store's own code,
``store_unavailable`` (reads and previews too, not a JSON-RPC error, and never the backend's code), within seconds,
and nothing is written: what docs/deployment.md says."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from gateway.config import parse_config
from tests.support.clients import Answers, connect, error_code, new_key, running_gateway
from tests.support.configs import config_data
from tests.support.processes import free_port
from tests.support.profiles import TENANTS

pytestmark = pytest.mark.anyio

DOWN = {
    "redis": "redis://127.0.0.1:{port}/0?socket_connect_timeout=1",
    "postgres": "postgresql://postgres@127.0.0.1:{port}/postgres?timeout=1",
}


@pytest.mark.parametrize("kind", DOWN)
async def test_every_tool_answers_store_unavailable_while_the_store_is_down(
    tmp_path: Path, era: str, kind: str
) -> None:
    db = tmp_path / "backend.db"
    store = DOWN[kind].format(port=free_port())
    data = config_data(TENANTS, db, *TENANTS.seed_demo, store=store, state_dir=tmp_path)
    data["rate_limits"] = {}  # the default per-caller bucket, which lives in the store
    async with running_gateway(parse_config(data), backend_in_process=True) as gw:
        with anyio.fail_after(60):
            async with connect(gw, era, Answers()) as client:
                listing = await client.call_tool(TENANTS.list_tool, {})
                planned = await client.call_tool(TENANTS.preview_tool, TENANTS.preview_args())
                written = await client.call_tool(
                    TENANTS.write_tool, {"planId": "pl_" + "a" * 22, "idempotencyKey": new_key()}
                )
    assert [error_code(result) for result in (listing, planned, written)] == ["store_unavailable"] * 3
    assert TENANTS.write_count(db) == 0
