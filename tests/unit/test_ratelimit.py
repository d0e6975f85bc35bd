"""Rate limits: token buckets per caller and per tool, refusing with rate_limited and a retry hint."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gateway.runtime import Gateway
from gateway.stores.buckets import Bucket
from tests.support.clients import ERAS, Answers, connect, error_body, error_code, new_key, preview, running_gateway
from tests.support.configs import config_data
from tests.support.profiles import TENANTS

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("ratelimit") / "backend.db"


@pytest.fixture(scope="module")
async def gw(db: Path, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Gateway]:
    from gateway.config import parse_config

    data: dict[str, Any] = config_data(TENANTS, db, *TENANTS.seed_demo, state_dir=tmp_path_factory.mktemp("state"))
    data["rate_limits"] = {"per_caller": {"per_second": 0.001, "burst": 12}}
    data["tools"]["reset_tenant"]["rate_limit"] = {"per_second": 0.001, "burst": 1}
    async with running_gateway(parse_config(data), backend_in_process=True) as gateway:
        yield gateway


async def test_a_write_tool_limit_refuses_the_next_write_and_changes_nothing(gw: Gateway, db: Path) -> None:
    async with connect(gw, ERAS[0], Answers()) as client:
        first = await client.call_tool(
            "reset_tenant", {"planId": (await preview(client, TENANTS))["planId"], "idempotencyKey": new_key()}
        )
        assert not first.is_error, first.content
        before = TENANTS.write_count(db)
        key = new_key()
        second = await client.call_tool(
            "reset_tenant", {"planId": (await preview(client, TENANTS))["planId"], "idempotencyKey": key}
        )
    assert error_code(second) == "rate_limited"
    assert error_body(second)["details"]["retryAfterSeconds"] > 0
    assert TENANTS.write_count(db) == before
    outcomes = [(entry.outcome, entry.code) async for entry in gw.store.audit_entries() if entry.idempotency_key == key]
    assert outcomes == [("refused", "rate_limited")]


async def test_the_per_caller_limit_covers_every_tool(gw: Gateway) -> None:
    codes = []
    async with connect(gw, ERAS[1]) as client:
        for _ in range(12):
            result = await client.call_tool("list_tenants", {"limit": 1})
            codes.append(error_code(result) if result.is_error else "ok")
    assert "rate_limited" in codes
    assert codes[-1] == "rate_limited"


def test_a_bucket_refills_at_its_rate_up_to_its_burst() -> None:
    bucket = Bucket(per_second=2, burst=2, now=0.0)
    assert [bucket.take(0.0), bucket.take(0.0)] == [0.0, 0.0]
    assert bucket.take(0.0) == pytest.approx(0.5)
    assert bucket.take(0.5) == 0.0
    assert bucket.take(100.0) == 0.0 and bucket.take(100.0) == 0.0 and bucket.take(100.0) > 0
