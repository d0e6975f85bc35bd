"""The unit tier's shared gateway: one per module and profile, its backend server running in this process."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from gateway.runtime import Gateway
from tests.support.clients import Clock, running_gateway
from tests.support.configs import gateway_config
from tests.support.profiles import Profile

ToolsChange = Callable[[Profile, dict[str, Any]], None] | None


@pytest.fixture(scope="module")
def db(profile: Profile, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The backend's SQLite file, seeded with the profile's demo data when the gateway first connects."""
    return tmp_path_factory.mktemp(profile.name) / "backend.db"


@pytest.fixture(scope="module")
def clock() -> Clock:
    """The module gateway's clock, settable for plan expiry."""
    return Clock()


@pytest.fixture(scope="module")
def tools_change() -> ToolsChange:
    """How a module changes the profile's tool config (override it in the module); None keeps the file's."""
    return None


@pytest.fixture(scope="module")
async def gw(
    profile: Profile, db: Path, clock: Clock, tools_change: ToolsChange, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Gateway]:
    """A gateway over the profile's own config, shared by every test of the module."""

    def change(tools: dict[str, Any]) -> None:
        if tools_change is not None:
            tools_change(profile, tools)

    state = tmp_path_factory.mktemp("state")
    config = gateway_config(profile, db, *profile.seed_demo, state_dir=state, tools=change)
    async with running_gateway(config, clock, backend_in_process=True) as gateway:
        yield gateway
