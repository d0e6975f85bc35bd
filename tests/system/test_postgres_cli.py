"""`mcp-safety-gateway migrate` against a real PostgreSQL, and the commands that refuse a database whose schema
is not theirs: migrate is idempotent and refuses a newer schema; serve, check and audit refuse an unmigrated or
newer one in one sentence naming gateway.store, before they touch anything; a password in the config file is
refused; and `audit list` / `audit verify` read and check the keyed chain a gateway wrote into PostgreSQL."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import psycopg
import pytest

from gateway.stores.postgres.schema import SCHEMA_VERSION, migrations
from gateway.stores.postgres.url import parse_url
from tests.support.clients import Answers, connect, new_key, preview, running_gateway
from tests.support.configs import gateway_config, write_config
from tests.support.postgres import PostgresServer, fresh_schema
from tests.support.profiles import TENANTS

pytestmark = pytest.mark.anyio
NAMES = [f"{migration.version:04d}_{migration.name}" for migration in migrations()]

PROFILE = TENANTS


async def cli(*args: str) -> tuple[int, str, str]:
    """Run the gateway's command line; its exit code, stdout and stderr."""
    done = await anyio.run_process([sys.executable, "-m", "gateway", *args], check=False)
    return done.returncode, done.stdout.decode(), done.stderr.decode()


async def sql(url: str, query: str) -> None:
    parsed = parse_url(url)
    async with await psycopg.AsyncConnection.connect(parsed.conninfo, autocommit=True) as conn:
        await conn.execute("SELECT set_config('search_path', %s, false)", [parsed.schema])
        await conn.execute(query.encode())


async def test_migrate_is_idempotent_and_serve_check_and_audit_refuse_a_schema_that_is_not_theirs(
    tmp_path: Path, postgres_server: PostgresServer
) -> None:
    url = fresh_schema(postgres_server.url)
    config = str(write_config(PROFILE, tmp_path, store=url))
    for command in (["serve", "--port", "1"], ["check"], ["audit", "list"]):
        code, _, err = await cli(*command, "--config", config)
        assert code == 2, (command, err)
        assert err.count("\n") == 1 and "gateway.store:" in err and "has no gateway tables" in err
        assert "mcp-safety-gateway migrate" in err

    assert await cli("migrate", "--config", config) == (
        0,
        f"migrated from version 0 to {SCHEMA_VERSION}: {', '.join(NAMES)}\n",
        "",
    )
    assert await cli("migrate", "--config", config) == (
        0,
        f"schema is at version {SCHEMA_VERSION}: nothing to do\n",
        "",
    )
    code, out, _ = await cli("check", "--config", config)
    assert code == 0 and "reset_tenant" in out

    await sql(url, f"INSERT INTO schema_migrations (version, name) VALUES ({SCHEMA_VERSION + 1}, 'from_the_future')")
    for command in (["migrate"], ["serve", "--port", "1"], ["check"], ["audit", "verify"]):
        code, _, err = await cli(*command, "--config", config)
        assert code == 2, (command, err)
        assert err.count("\n") == 1 and f"is at version {SCHEMA_VERSION + 1}, newer than this gateway knows" in err


async def test_a_password_in_the_config_file_is_refused_before_anything_connects(tmp_path: Path) -> None:
    config = str(write_config(PROFILE, tmp_path, store="postgresql://gw:hunter2@127.0.0.1:1/gw"))
    for command in (["migrate"], ["serve", "--port", "1"]):
        code, out, err = await cli(*command, "--config", config)
        assert code == 2 and "gateway.store: a PostgreSQL URL in the config file must not carry a password" in err
        assert "hunter2" not in out + err


async def test_audit_list_and_verify_read_the_chain_a_gateway_wrote_to_postgres(
    tmp_path: Path, postgres_url: str
) -> None:
    db = tmp_path / "backend.db"
    config = gateway_config(PROFILE, db, *PROFILE.seed_demo, store=postgres_url, state_dir=tmp_path / "state")
    async with running_gateway(config, backend_in_process=True) as gw, connect(gw, "2025-11-25", Answers()) as client:
        args = {"planId": (await preview(client, PROFILE))["planId"], "idempotencyKey": new_key()}
        await client.call_tool(PROFILE.write_tool, args)
        await client.call_tool(PROFILE.write_tool, args)
    toml = str(write_config(PROFILE, tmp_path, store=postgres_url))  # the same state dir: the same audit key
    code, out, _ = await cli("audit", "list", "--json", "--config", toml)
    assert code == 0
    assert [json.loads(line)["outcome"] for line in out.splitlines()] == ["applied", "replayed"]
    code, out, _ = await cli("audit", "verify", "--config", toml)
    assert code == 0, out

    await sql(postgres_url, "UPDATE audit SET entry = replace(entry, '\"replayed\"', '\"applied\"') WHERE seq = 2")
    code, out, _ = await cli("audit", "verify", "--config", toml)
    assert code == 1 and "FAIL" in out and "2" in out
