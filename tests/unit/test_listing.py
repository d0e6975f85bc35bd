"""A list tool reads the backend's unbounded list once per first page and cuts the pages after it from that read.

A first page (no cursor) always re-reads the list; a page after a cursor is cut from the list as the first page
read it, until that read is LISTING_SECONDS old. The backend's read count comes from the gateway's own metrics;
changes "out of band" are made in the backend's SQLite file, as a writer elsewhere would.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from gateway.backend.reads import LISTING_SECONDS
from gateway.runtime import Gateway
from tests.support.clients import Clock, connect, error_code, running_gateway
from tests.support.configs import gateway_config
from tests.support.profiles import Profile

pytestmark = pytest.mark.anyio

ITEMS = 120


@dataclass
class Setup:
    gw: Gateway
    db: Path
    clock: Clock


@pytest.fixture(scope="module")
async def setup(profile: Profile, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Setup]:
    db = tmp_path_factory.mktemp(profile.name) / "backend.db"
    config = gateway_config(profile, db, *profile.seed_many(ITEMS), state_dir=tmp_path_factory.mktemp("state"))
    clock = Clock()
    async with running_gateway(config, clock, backend_in_process=True) as gateway:
        yield Setup(gateway, db, clock)


def list_reads(setup: Setup, profile: Profile) -> float:
    """How many times the gateway has called the backend's list action so far."""
    action = setup.gw.config.tools[profile.list_tool].call.action  # type: ignore[union-attr]
    labels = {"action": action, "result": "ok", "backend": "default"}
    return setup.gw.metrics.registry.get_sample_value("gateway_backend_call_seconds_count", labels) or 0.0


async def page(client: Any, profile: Profile, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(profile.list_tool, arguments)
    assert result.structured_content is not None, result.content
    return dict(result.structured_content)


async def test_walking_every_page_reads_the_backend_list_once(setup: Setup, profile: Profile) -> None:
    async with connect(setup.gw, "2025-11-25") as client:
        before = list_reads(setup, profile)
        seen: list[str] = []
        arguments: dict[str, Any] = {"limit": 50}
        while True:
            body = await page(client, profile, **arguments)
            seen += [item[profile.id_field] for item in body[profile.items_key]]
            if "nextCursor" not in body:
                break
            arguments = {"limit": 50, "cursor": body["nextCursor"]}
        walked = list_reads(setup, profile)
        await page(client, profile, limit=50)
        again = list_reads(setup, profile)
    assert len(seen) == ITEMS == len(set(seen)) and seen == sorted(seen)
    assert walked - before == 1
    assert again - walked == 1


async def test_a_first_page_always_rereads_the_list(setup: Setup, profile: Profile) -> None:
    async with connect(setup.gw, "2025-11-25") as client:
        first = (await page(client, profile, limit=5))[profile.items_key][0]
        profile.bump(setup.db, first[profile.id_field])
        again = (await page(client, profile, limit=5))[profile.items_key][0]
    assert again[profile.id_field] == first[profile.id_field]
    assert again != first


async def test_a_page_after_a_cursor_comes_from_the_first_pages_read_until_it_ages_out(
    setup: Setup, profile: Profile
) -> None:
    async with connect(setup.gw, "2026-07-28") as client:
        first = await page(client, profile, limit=5)
        cursor = first["nextCursor"]
        second = await page(client, profile, limit=5, cursor=cursor)
        moved = second[profile.items_key][0]
        profile.bump(setup.db, moved[profile.id_field])
        cut = await page(client, profile, limit=5, cursor=cursor)
        setup.clock.offset += LISTING_SECONDS
        try:
            reread = await page(client, profile, limit=5, cursor=cursor)
        finally:
            setup.clock.offset -= LISTING_SECONDS
    assert cut == second
    assert reread[profile.items_key][0][profile.id_field] == moved[profile.id_field]
    assert reread[profile.items_key][0] != moved
    assert reread[profile.items_key][1:] == second[profile.items_key][1:]


async def test_concurrent_first_pages_all_see_a_change_made_before_they_were_sent(
    setup: Setup, profile: Profile
) -> None:
    async with connect(setup.gw, "2025-11-25") as client:
        before = (await page(client, profile, limit=5))[profile.items_key][0]
        profile.bump(setup.db, before[profile.id_field])
        firsts: list[dict[str, Any]] = []

        async def first_page() -> None:
            firsts.append((await page(client, profile, limit=5))[profile.items_key][0])

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tasks:
                for _ in range(8):
                    tasks.start_soon(first_page)
    assert len(firsts) == 8
    assert all(item[profile.id_field] == before[profile.id_field] and item != before for item in firsts)
    assert all(item == firsts[0] for item in firsts)


async def test_a_list_whose_items_lack_the_sort_key_is_a_backend_error(tmp_path: Path, profile: Profile) -> None:
    def sort_by_a_missing_field(tools: dict[str, Any]) -> None:
        tools[profile.list_tool]["sort_key"] = "no.such.field"

    config = gateway_config(
        profile,
        tmp_path / "backend.db",
        *profile.seed_demo,
        state_dir=tmp_path / "state",
        tools=sort_by_a_missing_field,
    )
    async with running_gateway(config, backend_in_process=True) as gw, connect(gw, "2025-11-25") as client:
        result = await client.call_tool(profile.list_tool, {})
    assert error_code(result) == "backend_error"


async def test_an_integral_float_limit_is_a_limit(setup: Setup, profile: Profile) -> None:
    async with connect(setup.gw, "2026-07-28") as client:
        whole = await page(client, profile, limit=3)
        integral = await page(client, profile, limit=3.0)
        after = await page(client, profile, limit=2.0, cursor=whole["nextCursor"])
    assert integral == whole
    assert len(after[profile.items_key]) == 2
