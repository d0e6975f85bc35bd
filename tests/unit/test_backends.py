"""One gateway over two backends when one of them cannot start: only that backend's tools fail, the other's
work, and the probes and metrics name each backend."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import httpx
import pytest

from gateway.config import parse_config
from gateway.http.app import build_app
from gateway.runtime import Gateway, open_gateway
from tests.support.clients import Answers, applied_body, connect, error_code, new_key, preview
from tests.support.configs import together_data
from tests.support.inprocess import opener_for
from tests.support.profiles import FLAGS, TENANTS

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
async def half_down(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[Gateway, Path]]:
    """The tenants backend in this process; the flags backend a child that cannot start (no such module)."""
    tmp = tmp_path_factory.mktemp("half_down")
    db = tmp / "backend.db"
    broken = {"flags": {"args": ["-m", "no_such_module"], "connect_timeout_seconds": 5}}
    data = together_data(TENANTS, db, *TENANTS.seed_demo, state_dir=tmp / "state", backends=broken)
    config = parse_config(data)
    openers = {"tenants": opener_for(config.backend_sections()["tenants"])}
    async with open_gateway(config, openers=openers) as gw:
        with anyio.fail_after(60):
            await gw.catalog()
        yield gw, db


async def test_the_tools_of_a_backend_that_is_down_fail_alone(half_down: tuple[Gateway, Path], era: str) -> None:
    gw, db = half_down
    version = TENANTS.version(db, TENANTS.other)
    async with connect(gw, era, Answers()) as client:
        listed = {tool.name for tool in (await client.list_tools()).tools}
        plan = await preview(client, TENANTS, target=TENANTS.other if era == "2025-11-25" else TENANTS.spare)
        reset = await client.call_tool(TENANTS.write_tool, {"planId": plan["planId"], "idempotencyKey": new_key()})
        flags_page = await client.call_tool(FLAGS.list_tool, {})
        flags_plan = await client.call_tool(FLAGS.preview_tool, FLAGS.preview_args())
        history = await client.call_tool("flag_history", {"key": FLAGS.main})
    # Listed: every tenants tool, and none of the flags backend's while it is down.
    assert listed == {TENANTS.list_tool, TENANTS.preview_tool, TENANTS.write_tool}
    if era == "2025-11-25":
        assert reset.structured_content == applied_body(plan, version + 1)
    else:
        assert not reset.is_error, reset.content
    assert error_code(flags_page) == "backend_unavailable"
    assert error_code(flags_plan) == "backend_unavailable"
    assert error_code(history) == "backend_unavailable"


async def test_readiness_and_metrics_name_each_backend(half_down: tuple[Gateway, Path]) -> None:
    gw, _ = half_down
    transport = httpx.ASGITransport(app=build_app(gw))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8080") as http:
        ready = await http.get("/readyz")
        metrics = (await http.get("/metrics")).text
    assert ready.status_code == 200  # one backend answers: its tools are served
    assert ready.json() == {"backend": "degraded", "backends": {"tenants": "up", "flags": "down"}, "store": "up"}
    assert 'gateway_backend_connected{backend="tenants"} 1.0' in metrics
    assert 'gateway_backend_connected{backend="flags"} 0.0' in metrics
    assert 'backend="tenants",result="ok"}' in metrics
