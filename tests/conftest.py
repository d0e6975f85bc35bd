"""Fixtures both tiers share. The helpers themselves live in tests/support (shared with bench/).

Every safety test runs once per profile (tests/support/profiles.py): the default ``manage_tenant`` god-tool and a
differently shaped ``manage_flags`` one, each wrapped by its own config file. tests/unit runs the backend server
inside the test process (no subprocess, no network); tests/system runs everything as real processes.

Property tests draw as many examples as the hypothesis profile says: ``dev`` (a few, for a fast local run) unless
CI is set (``ci``: the full count); ``HYPOTHESIS_PROFILE`` chooses one by name. scripts/test times the unit tier with
``dev`` and, with CI set, runs the property tests (``-m hypothesis``) again with ``ci``, untimed.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest
from hypothesis import settings

from tests.support.clients import ERAS
from tests.support.postgres import POSTGRES_MISSING, PostgresServer, fresh_schema, postgres_process, server_bin
from tests.support.processes import free_port
from tests.support.profiles import PROFILES, Profile
from tests.support.redis import REDIS_MISSING, redis_process

settings.register_profile("ci", max_examples=150)
settings.register_profile("dev", max_examples=25)
settings.load_profile(
    os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI", "").lower() in {"true", "1"} else "dev")
)


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module", params=PROFILES, ids=str)
def profile(request: pytest.FixtureRequest) -> Profile:
    """The god-tool under test; module-scoped so that each module's shared gateway serves one profile."""
    return request.param  # type: ignore[no-any-return]


@pytest.fixture(params=ERAS)
def era(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One real redis-server for the test session (no persistence); its URL."""
    if shutil.which("redis-server") is None:
        pytest.skip(REDIS_MISSING)
    port = free_port()
    with redis_process(tmp_path_factory.mktemp("redis"), port):
        yield f"redis://127.0.0.1:{port}/0"


@pytest.fixture
def redis_url(redis_server: str) -> str:
    """The session's Redis, emptied for this test."""
    import redis

    with redis.Redis.from_url(redis_server) as client:
        client.flushall()
    return redis_server


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One real PostgreSQL server for the test session (run as an unprivileged user; fsync off)."""
    if server_bin() is None:
        pytest.skip(POSTGRES_MISSING)
    with postgres_process(free_port(), fsync=False) as server:
        yield server


@pytest.fixture
async def postgres_url(postgres_server: PostgresServer) -> str:
    """A store URL on the session's server naming a schema of this test's own, migrated."""
    from gateway.stores.postgres.schema import migrate

    url = fresh_schema(postgres_server.url)
    await migrate(url)
    return url
