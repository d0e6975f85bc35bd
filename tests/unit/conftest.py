"""The unit tier's shared gateway: one per module and profile, its backend server running in this process."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from gateway.config import parse_config
from gateway.runtime import Gateway
from tests.support.clients import Clock, running_gateway
from tests.support.configs import gateway_config, together_data
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
def wrapping() -> str:
    """How the module gateway wraps the profile's backend: ``alone`` (the profile's own config) or ``together``
    (one gateway over both profiles' backends, with pass-through tools: tests.support.configs.together_data).
    A module runs in both by overriding this fixture with ``params=["alone", "together"]``."""
    return "alone"


@pytest.fixture(scope="module")
async def gw(
    profile: Profile,
    db: Path,
    clock: Clock,
    tools_change: ToolsChange,
    wrapping: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[Gateway]:
    """A gateway over the profile's own config (or both profiles' together), shared by every test of the module."""

    def change(tools: dict[str, Any]) -> None:
        if tools_change is not None:
            tools_change(profile, tools)

    state = tmp_path_factory.mktemp("state")
    if wrapping == "together":
        data = together_data(profile, db, *profile.seed_demo, state_dir=state)
        change(data["tools"])
        config = parse_config(data)
    else:
        config = gateway_config(profile, db, *profile.seed_demo, state_dir=state, tools=change)
    async with running_gateway(config, clock, backend_in_process=True) as gateway:
        yield gateway


@pytest.fixture
def database(tmp_path: Path) -> Path:
    """A seeded SQLite file behind the in-process statement-executing server (tests/support/sql_double.py)."""
    from tests.support.sql_servers import sqlite_database

    return sqlite_database(tmp_path / "app.db")


@pytest.fixture
def switches() -> Any:
    """How the in-process statement-executing server behaves, and what it was sent."""
    from tests.support.sql_double import Switches

    return Switches()
