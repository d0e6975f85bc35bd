"""`mcp-safety-gateway inspect` against three real servers of different shapes (the demo backend, the flags
backend, a low-level-SDK server): it finds the god-tool, calls nothing, and drafts a config that the gateway
refuses while a TODO is left and that, filled in by a person (here: by the answers below), passes `check` and
serves."""

from __future__ import annotations

import os
import shlex
import sqlite3
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from gateway.config import ConfigError, load_config, parse_config
from tests.support.asgi import serve_asgi
from tests.support.clients import Answers, error_code, new_key
from tests.support.configs import write_toml
from tests.support.processes import PYTHON, free_port, http_backend, serve
from tests.support.profiles import DATABASES, FLAGS, TENANTS, Profile

pytestmark = pytest.mark.anyio

DELETE = object()
"""An answer that removes the key (the person decided against it)."""

STRING = {"type": "string"}
COUNT = {"type": "integer", "minimum": 0}
TENANT_PREVIEW = {
    "description": "Plan a change to a tenant. Changes nothing.",
    "target.get.payload": {"id": "{target_id}"},
    "target.get.path": "",
    "target.id_field": "id",
    "target.version_field": "version",
    "target.not_found_text": "not found",
    "target.protected_field": "protected",
    "summary": {"rowsDeleted": {"target": "rows"}},
}
LEGACY_ANSWERS: dict[str, Any] = {
    "tools.list_tenants.description": "List tenants, one page at a time.",
    "tools.list_tenants.call.path": "tenants",
    "tools.list_tenants.sort_key": "id",
    "tools.list_tenants.fields": {"id": {"from": "id", "schema": STRING}, "rows": {"from": "rows", "schema": COUNT}},
    **{f"tools.preview_reseed_tenant.{key}": value for key, value in TENANT_PREVIEW.items()},
    "tools.preview_reseed_tenant.message": 'Delete {rowsDeleted} rows in {target_id} and load "{fixture}"?',
    "tools.preview_reseed_tenant.inputs": {
        "tenantId": {"target": True, "schema": {"type": "string", "pattern": "^[a-z0-9_]{1,64}$"}},
        "fixture": {"schema": {"type": "string", "enum": ["empty", "smoke"]}},
    },
    "tools.reseed_tenant.description": "Apply a reseed plan. Asks the user first.",
    "tools.reseed_tenant.call.payload": {"id": "{target_id}", "fixture": "{fixture}"},
    **{f"tools.preview_wipe_tenant.{key}": value for key, value in TENANT_PREVIEW.items()},
    "tools.preview_wipe_tenant.message": "Delete all {rowsDeleted} rows of {target_id}?",
    "tools.preview_wipe_tenant.inputs": {"tenantId": {"target": True, "schema": {"type": "string"}}},
    "tools.wipe_tenant.description": "Apply a wipe plan. Asks the user first.",
    "tools.wipe_tenant.call.payload": {"id": "{target_id}"},
}
DB_ANSWERS: dict[str, Any] = {
    "lookups": {"templates": {"call": {"action": "templates", "path": "result"}, "key": "id", "value": "rows"}},
    "tools.list_databases.description": "List databases, one page at a time.",
    "tools.list_databases.call.path": "result",
    "tools.list_databases.sort_key": "name",
    "tools.list_databases.fields": {"name": {"from": "name", "schema": STRING}},
    "tools.preview_restore_db.description": "Plan a restore. Changes nothing.",
    "tools.preview_restore_db.message": "Replace the {rowsDeleted} rows of {target_id} with {template}?",
    "tools.preview_restore_db.target.get.payload": {"name": "{target_id}"},
    "tools.preview_restore_db.target.get.path": "result",
    "tools.preview_restore_db.target.id_field": "name",
    "tools.preview_restore_db.target.version_field": "generation",
    "tools.preview_restore_db.target.not_found_text": "unknown database",
    "tools.preview_restore_db.target.protected_field": "frozen",
    "tools.preview_restore_db.inputs": {
        "database": {"target": True, "schema": STRING},
        "template": {"enum_from": "templates", "schema": STRING},
    },
    "tools.preview_restore_db.summary": {"rowsDeleted": {"target": "rows"}},
    "tools.restore_db.description": "Apply a restore plan. Asks the user first.",
    "tools.restore_db.call.payload": {"name": "{target_id}", "template": "{template}"},
    # A dropped database cannot be re-read to confirm the drop: not wrapped.
    "tools.preview_drop_db": DELETE,
    "tools.drop_db": DELETE,
    # Its status tool claims to be read-only: confirmed. Its vacuum tool states nothing: kept hidden.
    "tools.server_status.annotations.read_only": True,
    "tools.server_status.annotations.destructive": False,
    "tools.vacuum_database": DELETE,
}


def flags_answers() -> dict[str, Any]:
    """The flags god-tool lists no actions: the person writes its tools (here: the ones config/flags.toml has)."""
    shipped = load_config(FLAGS.config).model_dump(by_alias=True, exclude_none=True)
    return {"lookups": shipped["lookups"], "tools": shipped["tools"]}


def inspect(profile: Profile, tmp: Path) -> tuple[int, str, Path]:
    db, draft = tmp / "backend.db", tmp / "draft.toml"
    command = shlex.join([PYTHON, "-m", profile.backend_module, "--stdio", "--db", str(db), *profile.seed_demo])
    done = subprocess.run(
        [PYTHON, "-m", "gateway", "inspect", "--command", command, "--draft", str(draft)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.returncode, done.stdout + done.stderr, draft


def fill(data: dict[str, Any], answers: dict[str, Any]) -> dict[str, Any]:
    """The draft with each answered key set (or removed), as a person would edit it."""
    for path, answer in answers.items():
        *parents, last = path.split(".")
        table = data
        for part in parents:
            table = table.setdefault(part, {})
        if answer is DELETE:
            del table[last]
        else:
            table[last] = answer
    return data


def prepared(draft: Path, answers: dict[str, Any], tmp: Path) -> dict[str, Any]:
    data = tomllib.loads(draft.read_text())
    with pytest.raises(ConfigError) as undecided:
        parse_config(data)
    assert "still a TODO of the draft" in str(undecided.value)
    data = fill(data, answers)
    data["gateway"].update(store=f"sqlite:{tmp}/gateway.db", state_dir=str(tmp / "state"))
    parse_config(data)  # every TODO is answered
    return data


def check(config: Path) -> tuple[int, str]:
    done = subprocess.run(
        [PYTHON, "-m", "gateway", "check", "--config", str(config)], capture_output=True, text=True, timeout=120
    )
    return done.returncode, done.stdout + done.stderr


@pytest.mark.parametrize(
    ("profile", "answers", "found"),
    [
        (TENANTS, LEGACY_ANSWERS, ['action "reseed": destructive', 'action "list": read', 'action "create": write']),
        (FLAGS, None, ['argument "op" names an action', 'free-form payload argument "args"']),
        (DATABASES, DB_ANSWERS, ["its enum lists actions of different risk", "server_status: claims to be read-only"]),
    ],
    ids=str,
)
async def test_inspect_finds_the_god_tool_and_its_filled_draft_passes_check_and_serves(
    tmp_path: Path, profile: Profile, answers: dict[str, Any] | None, found: list[str]
) -> None:
    code, output, draft = inspect(profile, tmp_path)
    assert code == 0, output
    assert f"{profile.name}: GOD-TOOL" in output
    assert "hints left to the spec's defaults: readOnlyHint (would be false)" in output
    for finding in found:
        assert finding in output
    assert profile.write_count(tmp_path / "backend.db") == 0
    data = prepared(draft, answers if answers is not None else flags_answers(), tmp_path)
    config = write_toml(data, tmp_path / "filled.toml")
    code, output = check(config)
    assert code == 0, output
    port = free_port()
    async with serve(config, port), Client(f"http://127.0.0.1:{port}/mcp", elicitation_callback=Answers()) as client:
        listed = {tool.name for tool in (await client.list_tools()).tools}
        assert profile.name not in listed
        write = next(name for name, tool in data["tools"].items() if tool["kind"] == "write")
        preview_name = data["tools"][write]["preview"]
        target = next(name for name, field in data["tools"][preview_name]["inputs"].items() if field.get("target"))
        choice = next((name for name in data["tools"][preview_name]["inputs"] if name != target), None)
        arguments = {target: profile.main, **({choice: profile.choices[1]} if choice else {})}
        plan = await client.call_tool(preview_name, arguments)
        assert plan.structured_content is not None, plan.content
        result = await client.call_tool(
            write, {"planId": plan.structured_content["planId"], "idempotencyKey": new_key()}
        )
        absent = await client.call_tool(preview_name, {**arguments, target: profile.absent})
    assert not result.is_error, result.content
    assert profile.write_count(tmp_path / "backend.db") == 1
    assert error_code(absent).endswith("_not_found")


async def test_inspect_asks_the_server_for_its_tools_and_nothing_else(tmp_path: Path) -> None:
    code, output, draft = inspect(DATABASES, tmp_path)
    assert code == 0, output
    with sqlite3.connect(tmp_path / "backend.db") as conn:
        heard = [row[0] for row in conn.execute("SELECT method FROM requests ORDER BY id")]
    assert heard == ["tools/list"]
    assert draft.exists()


def test_an_unreachable_server_is_reported_without_a_traceback(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "gateway", "inspect", "--url", f"http://127.0.0.1:{free_port()}/mcp", "--timeout", "20"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    assert "cannot read the server's tools" in done.stdout
    assert "Traceback" not in done.stdout + done.stderr


async def refusing(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """An HTTP server that is no MCP server: 401 on /private, 404 anywhere else."""
    status = 401 if scope["path"] == "/private" else 404
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"no"})


@pytest.mark.parametrize(
    ("case", "where", "names", "way_out"),
    [
        ("nothing listens", ["--url", "http://127.0.0.1:{free}/mcp"], "http://127.0.0.1:{free}/mcp", "--url"),
        ("not MCP", ["--url", "http://127.0.0.1:{web}/wrong"], "HTTP 404", "--url"),
        ("wants a token", ["--url", "http://127.0.0.1:{web}/private"], "HTTP 401", "--header"),
        ("no such command", ["--command", "no-such-server --stdio"], "no-such-server", "--command"),
        ("not a program", ["--command", "{here}"], "not an executable", "--command"),
        ("exits at once", ["--command", f"{PYTHON} -c pass"], "exited", "--command"),
        ("never answers", ["--command", "sleep 30", "--timeout", "2"], "2 s", "--timeout"),
    ],
)
async def test_a_server_that_cannot_be_read_is_named_with_the_way_out(
    tmp_path: Path, case: str, where: list[str], names: str, way_out: str
) -> None:
    web = free_port()
    fill: dict[str, object] = {"free": free_port(), "web": web, "here": tmp_path}
    async with serve_asgi(refusing, web):
        args = [word.format(**fill) for word in where]
        done = await anyio.run_process([PYTHON, "-m", "gateway", "inspect", "--timeout", "20", *args], check=False)
    out, err = done.stdout.decode(), done.stderr.decode()
    assert done.returncode == 1, (case, out, err)
    [line] = [line for line in out.splitlines() if line.startswith("cannot read the server's tools: ")]
    assert names.format(**fill) in line and way_out in line, (case, line)
    assert "Group" not in line and "Error" not in line and "Traceback" not in out + err, (case, line)


async def test_inspect_over_http_keeps_header_values_out_of_the_draft(tmp_path: Path) -> None:
    db, draft, port = tmp_path / "backend.db", tmp_path / "draft.toml", free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    async with http_backend(DATABASES, db, port, *DATABASES.seed_demo):
        done = await anyio.run_process(
            [
                PYTHON, "-m", "gateway", "inspect", "--url", url, "--draft", str(draft),
                "--header", "X-Inspector: secret-literal", "--header-env", "Authorization=DB_ADMIN_TOKEN",
            ],
            env={**os.environ, "DB_ADMIN_TOKEN": "secret-from-env"},
            check=False,
        )  # fmt: skip
    assert done.returncode == 0, done.stdout.decode() + done.stderr.decode()
    text = draft.read_text()
    assert "secret" not in text
    backend = tomllib.loads(text)["backend"]
    assert backend == {
        "transport": "http",
        "url": url,
        "headers_from_env": {"Authorization": "DB_ADMIN_TOKEN"},
        "tool": "manage_db",
        "action_argument": "command",
        "payload_argument": "params",
    }
