"""list_tenants stays bounded over an unbounded backend list, with opaque, signed cursors."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.runtime import Gateway
from tests.conftest import ERAS, connect, error_code, gateway_config, running_gateway

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
async def gw(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Gateway]:
    db = tmp_path_factory.mktemp("backend") / "legacy.db"
    config = gateway_config(db, "--seed-tenants", "120", state_dir=tmp_path_factory.mktemp("state"))
    async with running_gateway(config) as gateway:
        yield gateway


@pytest.mark.parametrize("era", ERAS)
async def test_following_cursors_visits_every_tenant_exactly_once(gw: Gateway, era: str) -> None:
    seen: list[str] = []
    pages = 0
    async with connect(gw, era) as client:
        first = await client.call_tool("list_tenants", {})
        assert first.structured_content is not None
        assert len(first.structured_content["tenants"]) == 20
        assert "nextCursor" in first.structured_content
        arguments: dict[str, object] = {"limit": 50}
        while True:
            page = await client.call_tool("list_tenants", arguments)
            assert page.structured_content is not None, page.content
            assert len(page.structured_content["tenants"]) <= 50
            seen += [tenant["id"] for tenant in page.structured_content["tenants"]]
            pages += 1
            if "nextCursor" not in page.structured_content:
                break
            arguments = {"limit": 50, "cursor": page.structured_content["nextCursor"]}
    assert pages == 3
    assert len(seen) == 120 == len(set(seen))
    assert seen == sorted(seen)


@pytest.mark.parametrize(
    "cursor", ["tn_bulk000019", "eyJ0IjoibGlzdF90ZW5hbnRzIiwiYWZ0ZXIiOiJ0bl9idWxrMDAwMDE5In0.AAAA", "x.y"]
)
async def test_a_forged_cursor_is_refused(gw: Gateway, cursor: str) -> None:
    async with connect(gw, "2025-11-25") as client:
        result = await client.call_tool("list_tenants", {"cursor": cursor})
    assert error_code(result) == "invalid_cursor"


async def test_a_cursor_is_opaque_and_survives_a_new_codec_with_the_same_key(gw: Gateway, tmp_path: Path) -> None:
    from gateway.cursor import CursorCodec

    async with connect(gw, "2025-11-25") as client:
        page = await client.call_tool("list_tenants", {"limit": 5})
    assert page.structured_content is not None
    cursor = page.structured_content["nextCursor"]
    assert "tn_bulk" not in cursor
    assert CursorCodec(gw.keys).decode("list_tenants", cursor) == page.structured_content["tenants"][-1]["id"]
