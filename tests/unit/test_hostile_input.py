"""Arbitrary JSON thrown at every published tool: each answer is a clean, documented refusal (or a valid
success), never a crash, a leaked internal message, or a backend write."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp.types as types
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client
from mcp.shared.exceptions import MCPError

from gateway.errors import Code
from tests.support.clients import ERAS, Answers, connect, running_gateway
from tests.support.configs import gateway_config
from tests.support.profiles import TENANTS

LEAKS = ("Traceback", "Error executing", "sqlite", 'File "', "Exception")
KNOWN_KEYS = ["limit", "cursor", "tenantId", "fixture", "planId", "idempotencyKey", "confirm"]
TOOLS = ["list_tenants", "preview_tenant_reset", "reset_tenant"]

scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=40)
json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)
near_misses = st.fixed_dictionaries(
    {},
    optional={
        "limit": st.integers(-5, 80) | json_values,
        "cursor": st.text(max_size=80) | json_values,
        "tenantId": st.sampled_from(["tn_checkout01", "tn_prod_eu", "tn_nobody", ""]) | st.text(max_size=70),
        "fixture": st.sampled_from(["empty", "smoke", "nope"]) | json_values,
        "planId": st.from_regex(r"pl_[A-Za-z0-9_-]{22}", fullmatch=True) | st.text(max_size=30),
        "idempotencyKey": st.from_regex(r"[A-Za-z0-9_.:-]{8,40}", fullmatch=True) | json_values,
    },
)
arguments = near_misses | st.dictionaries(st.sampled_from(KNOWN_KEYS) | st.text(max_size=8), json_values, max_size=4)


@pytest.fixture(scope="module", params=ERAS)
def harness(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[BlockingPortal, Client, Path]]:
    db = tmp_path_factory.mktemp("hostile") / "backend.db"
    config = gateway_config(TENANTS, db, *TENANTS.seed_demo, state_dir=tmp_path_factory.mktemp("state"))
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(running_gateway(config, backend_in_process=True)) as gw,
        portal.wrap_async_context_manager(connect(gw, request.param, Answers())) as client,
    ):
        yield portal, client, db


@pytest.mark.parametrize("tool", TOOLS)
@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])  # examples: the profile
@given(args=arguments)
def test_arbitrary_arguments_get_a_documented_answer_and_write_nothing(
    harness: tuple[BlockingPortal, Client, Path], tool: str, args: dict[str, Any]
) -> None:
    portal, client, db = harness
    before = TENANTS.write_count(db)
    try:
        result = portal.call(client.call_tool, tool, args)
    except MCPError as exc:  # only the SDK's own refusal of malformed state may surface as JSON-RPC
        pytest.fail(f"{tool} raised a protocol error {exc.code}: {exc.message}")
    assert isinstance(result, types.CallToolResult)
    text = result.content[0].text if result.content and isinstance(result.content[0], types.TextContent) else ""
    sent = json.dumps(args, ensure_ascii=False)  # an argument name the caller made up may be echoed back
    assert not any(leak in text for leak in LEAKS if leak not in sent), text
    if result.is_error:
        assert result.structured_content is None
        assert json.loads(text)["code"] in {code.spelled(TENANTS.noun) for code in Code} - {"rate_limited"}
    else:
        assert tool != "reset_tenant"
        assert result.structured_content == json.loads(text)
    assert TENANTS.write_count(db) == before
