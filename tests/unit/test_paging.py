"""The list tool stays bounded over an unbounded backend list, with opaque, signed cursors."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from gateway.cursor import CursorCodec
from gateway.errors import ToolError
from gateway.runtime import Gateway
from tests.support.clients import ERAS, connect, error_code, running_gateway
from tests.support.configs import gateway_config
from tests.support.profiles import Profile

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
async def gw(profile: Profile, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Gateway]:
    db = tmp_path_factory.mktemp(profile.name) / "backend.db"
    config = gateway_config(profile, db, *profile.seed_many(120), state_dir=tmp_path_factory.mktemp("state"))
    async with running_gateway(config, backend_in_process=True) as gateway:
        yield gateway


@pytest.mark.parametrize("era", ERAS)
async def test_following_cursors_visits_every_item_exactly_once(gw: Gateway, profile: Profile, era: str) -> None:
    seen: list[str] = []
    pages = 0
    async with connect(gw, era) as client:
        first = await client.call_tool(profile.list_tool, {})
        assert first.structured_content is not None
        assert len(first.structured_content[profile.items_key]) == 20
        assert "nextCursor" in first.structured_content
        arguments: dict[str, object] = {"limit": 50}
        while True:
            page = await client.call_tool(profile.list_tool, arguments)
            assert page.structured_content is not None, page.content
            items = page.structured_content[profile.items_key]
            assert len(items) <= 50
            seen += [item[profile.id_field] for item in items]
            pages += 1
            if "nextCursor" not in page.structured_content:
                break
            arguments = {"limit": 50, "cursor": page.structured_content["nextCursor"]}
    assert pages == 3
    assert len(seen) == 120 == len(set(seen))
    assert seen == sorted(seen)


async def test_a_forged_cursor_is_refused(gw: Gateway, profile: Profile) -> None:
    async with connect(gw, "2025-11-25") as client:
        page = await client.call_tool(profile.list_tool, {"limit": 5})
        assert page.structured_content is not None
        real = page.structured_content["nextCursor"]
        last_id = page.structured_content[profile.items_key][-1][profile.id_field]
        body, _, tag = real.partition(".")
        # The last three are not ASCII (a tag with "\x80" once raised inside hmac.compare_digest).
        forged = [last_id, f"{body}.{'A' * len(tag)}", "x.y", real + "x", ".\x80", f"{body}.é", "\ud800.x"]
        results = [await client.call_tool(profile.list_tool, {"cursor": cursor}) for cursor in forged]
    assert [error_code(result) for result in results] == ["invalid_cursor"] * len(forged)


async def test_a_cursor_is_opaque_and_valid_for_a_new_codec_with_the_same_key(gw: Gateway, profile: Profile) -> None:
    async with connect(gw, "2025-11-25") as client:
        page = await client.call_tool(profile.list_tool, {"limit": 5})
    assert page.structured_content is not None
    cursor = page.structured_content["nextCursor"]
    last_id = page.structured_content[profile.items_key][-1][profile.id_field]
    assert last_id not in cursor
    assert CursorCodec(gw.keys).decode(profile.list_tool, cursor) == last_id
    with pytest.raises(ToolError) as refused:
        CursorCodec([b"another key of at least thirty-two bytes"]).decode(profile.list_tool, cursor)
    assert refused.value.code == "invalid_cursor"
