"""The unit tier's shared gateway: one per module and profile, its backend server running in this process.

Two session fixtures take repeated waiting and work out of the SDK client, changing no answer: its pause before
retrying a state-only InputRequiredResult (``client_retries_at_once``), and its check of the same output schemas
against the metaschema in every new session (``each_output_schema_checked_once``).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from mcp.client import _input_required

from gateway.config import parse_config
from gateway.runtime import Gateway
from tests.support.clients import Clock, running_gateway
from tests.support.configs import gateway_config, together_data
from tests.support.profiles import Profile

ToolsChange = Callable[[Profile, dict[str, Any]], None] | None


@pytest.fixture(scope="session", autouse=True)
def client_retries_at_once() -> Iterator[None]:
    """A 2026-07-28 client that is answered InputRequiredResult with state only (a url-mode write still waiting for
    its approval) sleeps before it retries: 50 ms doubling to 250 ms, real time. In this tier the gateway holds each
    round on the test's clock (gateway.write.ask.people), so those sleeps were the only wait left (about 0.9 s per
    pending call); here the client retries at once and the rounds, their count and their answers are unchanged.
    The SDK names the pause in one private constant (doubling 0 keeps it 0); if it is renamed this fails loudly."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_input_required, "_STATE_ONLY_BACKOFF_INITIAL_SECONDS", 0.0)
        yield


@pytest.fixture(scope="session", autouse=True)
def each_output_schema_checked_once() -> Iterator[None]:
    """Before a new SDK client session validates a tool's first result, it checks the tool's output schema against
    the metaschema (2-3 ms a schema), and this tier opens hundreds of sessions over the same few schemas: about 530
    checks, 1.4 s of CPU a run. The check is a pure function of the schema, so one that passed is not checked
    again; one that fails is checked, and fails, every time."""
    passed: set[str] = set()
    check = Draft202012Validator.check_schema

    def check_once(cls: type[Draft202012Validator], schema: Any, *args: Any, **kwargs: Any) -> None:
        key = json.dumps(schema, sort_keys=True, default=repr)
        if key not in passed:
            check(schema, *args, **kwargs)
            passed.add(key)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Draft202012Validator, "check_schema", classmethod(check_once))
        yield


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
