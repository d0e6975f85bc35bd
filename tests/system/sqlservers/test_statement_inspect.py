"""``inspect`` reads the real statement-executing servers and drafts their wrapping: dbhub's ``execute_sql {sql}``
and mcp-alchemy's ``execute_query {query}`` are recognised, drafted as ``[statements.NAME]`` with the statement
query, preview and execute tools and a TODO for each decision (dialect, answers, tables, classes, a read-only
tool); answered, the draft passes ``check`` against the server and publishes the three tools."""

from __future__ import annotations

import shlex
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from gateway.config import ConfigError, parse_config
from tests.support.configs import write_toml
from tests.support.sql_servers import ALCHEMY, dbhub_params

DECIDED = ("read_tool", "dialect", "answers", "tables")


def inspected(command: list[str], tmp: Path, env: dict[str, str] | None = None) -> tuple[str, dict[str, Any]]:
    draft = tmp / "draft.toml"
    done = subprocess.run(
        [sys.executable, "-m", "gateway", "inspect", "--command", shlex.join(command), "--draft", str(draft)],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout, tomllib.loads(draft.read_text())


def answered(data: dict[str, Any], name: str, **answers: Any) -> dict[str, Any]:
    """The draft as a person completes it: the statement decisions answered, every other tool left out."""
    with pytest.raises(ConfigError) as undecided:
        parse_config(data)
    refused = str(undecided.value)
    assert all(f"statements.{name}.{key}: still a TODO" in refused for key in DECIDED)
    assert "tools.execute_statement.classes: still a TODO" in refused
    statements = {key: value for key, value in data["statements"][name].items() if key != "read_tool"}
    tools = {tool: config for tool, config in data["tools"].items() if config["kind"].startswith("statement_")}
    tools["execute_statement"]["classes"] = ["delete"]
    return {**data, "statements": {name: {**statements, **answers}}, "tools": tools}


def check(data: dict[str, Any], tmp: Path) -> subprocess.CompletedProcess[str]:
    config = write_toml({**data, "gateway": {"store": "memory", "state_dir": str(tmp / "state")}}, tmp / "filled.toml")
    return subprocess.run(
        [sys.executable, "-m", "gateway", "check", "--config", str(config)], capture_output=True, text=True, timeout=180
    )


def test_inspect_drafts_dbhubs_execute_sql_as_statement_tools_that_check_accepts(
    pg_database: str, tmp_path: Path
) -> None:
    params = dbhub_params(pg_database)
    report, data = inspected([params.command, *params.args], tmp_path)
    assert 'execute_sql: EXECUTES STATEMENTS (argument "sql" is named for SQL)' in report
    assert data["statements"]["execute_sql"]["argument"] == "sql"
    filled = answered(data, "execute_sql", dialect="postgres", answers="dbhub", tables=["tenants", "rows"])
    checked = check(filled, tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    for tool in ("query", "preview_statement", "execute_statement"):
        assert tool in checked.stdout


def test_inspect_drafts_mcp_alchemys_execute_query_as_statement_tools_that_check_accepts(
    sqlite_file: Path, tmp_path: Path
) -> None:
    command = ["env", f"DB_URL=sqlite:///{sqlite_file}", str(ALCHEMY)]
    report, data = inspected(command, tmp_path)
    assert "execute_query: EXECUTES STATEMENTS" in report, report
    assert data["statements"]["execute_query"]["argument"] == "query"
    filled = answered(data, "execute_query", dialect="sqlite", answers="mcp-alchemy", tables=["tenants", "rows"])
    checked = check(filled, tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "execute_statement" in checked.stdout
