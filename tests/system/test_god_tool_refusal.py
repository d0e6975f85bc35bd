"""The attack of issue 25 as a test: a config that passes the god-tool through (`manage_tenant` under another name,
read-only) is refused by `check` and `serve` with a sentence naming it, before any backend is started; and a
backend tool that takes a command argument is never published, `check` naming it."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from tests.support.configs import config_data, write_toml
from tests.support.processes import PYTHON, ROOT, free_port
from tests.support.profiles import DATABASES, TENANTS

pytestmark = pytest.mark.anyio

READ_ONLY = {"read_only": True, "destructive": False, "idempotent": True, "open_world": False}


async def run(*args: str) -> tuple[int, str]:
    done = await anyio.run_process([PYTHON, "-m", "gateway", *args], check=False, cwd=ROOT)
    return done.returncode, done.stdout.decode() + done.stderr.decode()


async def test_a_config_that_passes_manage_tenant_through_is_refused_by_check_and_serve(tmp_path: Path) -> None:
    db = tmp_path / "backend.db"
    data = config_data(TENANTS, db, *TENANTS.seed_demo, store=f"sqlite:{tmp_path}/gateway.db", state_dir=tmp_path)
    data["tools"]["tenant_admin"] = {"kind": "passthrough", "source": "manage_tenant", "annotations": READ_ONLY}
    config = write_toml(data, tmp_path / "gateway.toml")
    for command in (["check"], ["serve", "--port", str(free_port())]):
        code, output = await run(*command, "--config", str(config))
        assert code == 2, output
        assert 'tools.tenant_admin.source: "manage_tenant" is the god-tool that tools.list_tenants' in output
    assert not db.exists()  # no backend was ever started, so nothing could be written


async def test_a_backend_tool_that_takes_a_command_is_not_published_and_check_names_it(tmp_path: Path) -> None:
    data = config_data(DATABASES, tmp_path / "databases.db", *DATABASES.seed_demo, state_dir=tmp_path)
    data["tools"] = {
        "db_admin": {
            "kind": "passthrough",
            "source": "manage_db",
            "annotations": READ_ONLY,
            "output_schema": {"type": "object"},
        }
    }
    data.pop("lookups")
    code, output = await run("check", "--config", str(write_toml(data, tmp_path / "gateway.toml")))
    assert code == 1, output
    assert 'FAIL  tools.db_admin.source: "manage_db" takes an argument "command" that names an action' in output
