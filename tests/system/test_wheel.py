"""The wheel as a newcomer installs it: built with ``python -m build``, installed in a fresh venv, ``serve``
started from an empty folder and from the filesystem root, and a preview plus a confirmed reset through it with a
real SDK client. State lands in the platform state directory or beside the config, never in the working directory
or in ``/var``. The PostgreSQL store's migrations ship in it, found where ``migrate`` looks for them."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from gateway.stores.postgres.schema import migrations
from tests.support.clients import Answers, new_key, preview
from tests.support.processes import ROOT, free_port, process
from tests.support.profiles import TENANTS

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(600)]

STATE_FILES = {"gateway.db", "legacy.db", "secret.key"}


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fresh venv with the built wheel (and its dependencies) installed; its bin folder."""
    out = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)], check=True, capture_output=True)
    venv = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    wheel = next(out.glob("*.whl"))
    subprocess.run([venv / "bin" / "python", "-m", "pip", "install", "--quiet", str(wheel)], check=True)
    yield venv / "bin"


def host_env(state_home: Path) -> dict[str, str]:
    """What a host gives the process: a bare PATH, a home, and (here) where the platform state dir is."""
    return {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root"), "XDG_STATE_HOME": str(state_home)}


async def reset_through(port: int) -> None:
    """A preview and a confirmed reset over HTTP, with the 2025-era client the terminal also uses."""
    url = f"http://127.0.0.1:{port}/mcp"
    async with Client(streamable_http_client(url), mode="legacy", elicitation_callback=Answers()) as client:
        plan = await preview(client, TENANTS)
        done = await client.call_tool(TENANTS.write_tool, {"planId": plan["planId"], "idempotencyKey": new_key()})
    assert not done.is_error, done.content
    assert done.structured_content is not None and done.structured_content["replayed"] is False


def var_files() -> set[str]:
    return {path.name for path in Path("/var").iterdir()} if Path("/var").is_dir() else set()


async def test_the_wheel_serves_its_built_in_config_from_an_empty_folder(installed: Path, tmp_path: Path) -> None:
    empty, state_home, port = tmp_path / "empty", tmp_path / "state-home", free_port()
    empty.mkdir()
    args = [str(installed / "mcp-safety-gateway"), "serve", "--port", str(port)]
    with (tmp_path / "stderr.log").open("w") as stderr:
        async with process(args, port, cwd=empty, env=host_env(state_home), stderr=stderr):
            await reset_through(port)
    state = state_home / "mcp-safety-gateway"
    assert {path.name for path in state.iterdir()} >= STATE_FILES
    assert TENANTS.write_count(state / "legacy.db") == 1
    assert list(empty.iterdir()) == []
    assert f"state: store sqlite:{state}/gateway.db" in (tmp_path / "stderr.log").read_text()


async def test_the_wheel_serves_an_init_config_from_the_filesystem_root(installed: Path, tmp_path: Path) -> None:
    folder, port = tmp_path / "conf", free_port()
    env = host_env(tmp_path / "state-home")
    await anyio.run_process([installed / "mcp-safety-gateway", "init", str(folder)], env=env, cwd="/")
    before = var_files()
    args = [str(installed / "mcp-safety-gateway"), "serve", "--config", str(folder / "gateway.toml")]
    async with process([*args, "--port", str(port)], port, cwd="/", env=env, stderr=subprocess.DEVNULL):
        await reset_through(port)
    state = folder / "var"
    assert {path.name for path in state.iterdir()} >= STATE_FILES
    assert TENANTS.write_count(state / "legacy.db") == 1
    assert var_files() - before == set()
    assert not (tmp_path / "state-home").exists()


async def test_the_wheel_ships_every_migration_where_migrate_finds_it(installed: Path, tmp_path: Path) -> None:
    shipped = await anyio.run_process(
        [
            installed / "python",
            "-c",
            "from gateway.stores.postgres.schema import migrations\n"
            "print([(m.version, m.name, len(m.sql)) for m in migrations()])",
        ],
        cwd=tmp_path,  # not the checkout: the installed package, not the source tree
    )
    source = [(migration.version, migration.name, len(migration.sql)) for migration in migrations()]
    assert len(source) >= 2
    assert shipped.stdout.decode().strip() == repr(source)
