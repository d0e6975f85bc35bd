"""`inspect` and `check` against a server that lies (tests/hostile_backend, a real SDK server over HTTP): its name,
version, tool names, descriptions and schemas hold newlines, quotes, brackets, control and bidi characters. The
draft parses to exactly the tables the drafter meant, the terminal gets no raw control character, and `check` on
the decided draft sends the server nothing the operator did not write (no header, no secret, no call)."""

from __future__ import annotations

import json
import os
import tomllib
import unicodedata
from pathlib import Path
from typing import Any

import anyio
import pytest

from gateway.cli.inspect.draft import draft
from gateway.cli.inspect.findings import examine
from gateway.config import ConfigError, parse_config
from gateway.text import HIDDEN
from tests.hostile_backend.__main__ import NAME, TOOLS
from tests.support.configs import write_toml
from tests.support.processes import PYTHON, ROOT, free_port, hostile_args, process

pytestmark = pytest.mark.anyio

SECRET = "s3cr3t-" * 6
"""The gateway's secret key in the environment of `check`: it must never reach the server."""
HTTP_HEADERS = {
    "host", "accept", "accept-encoding", "connection", "user-agent", "content-type", "content-length",
    "mcp-protocol-version", "mcp-session-id",
}  # fmt: skip
"""What any HTTP MCP client sends; anything else came from the config."""


def hidden(text: str) -> list[str]:
    """The characters of ``text`` a terminal or an editor would not show as themselves (a newline aside)."""
    return [char for char in text if char != "\n" and unicodedata.category(char) in HIDDEN]


def without_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: without_none(item) for key, item in value.items() if item is not None}
    return value


def decided(data: dict[str, Any]) -> dict[str, Any]:
    """The draft as an operator completes it: each hint answered with the server's claim, trusted."""
    claims = {tool.name: tool.annotations for tool in TOOLS}
    for name, entry in data["tools"].items():
        hints = claims[entry.get("source", name)]
        assert hints is not None
        stated = {
            "read_only": hints.read_only_hint,
            "destructive": hints.destructive_hint,
            "idempotent": hints.idempotent_hint,
            "open_world": hints.open_world_hint,
        }
        for key, value in entry["annotations"].items():
            if isinstance(value, str) and value.startswith("TODO"):
                entry["annotations"][key] = stated[key]
    return data


async def test_a_hostile_server_steers_neither_the_draft_nor_the_terminal_nor_check(tmp_path: Path) -> None:
    heard, draft_file, port = tmp_path / "heard.jsonl", tmp_path / "draft.toml", free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    async with process(hostile_args(port, heard), port, cwd=ROOT):
        inspected = await anyio.run_process(
            [PYTHON, "-m", "gateway", "inspect", "--url", url, "--draft", str(draft_file)], check=False, cwd=ROOT
        )
        output = inspected.stdout.decode() + inspected.stderr.decode()
        assert inspected.returncode == 0, output
        assert hidden(output) == []
        text = draft_file.read_text(encoding="utf-8")
        assert hidden(text) == []
        parsed = tomllib.loads(text)
        assert parsed == without_none(draft(NAME, {"transport": "http", "url": url}, [examine(t) for t in TOOLS]))
        assert parsed["backend"] == {"transport": "http", "url": url}
        with pytest.raises(ConfigError) as undecided:  # its claims are questions, not decisions
            parse_config(parsed)
        assert "tools.flush_cache.annotations.read_only: still a TODO" in str(undecided.value)
        data = decided(parsed)
        data["gateway"].update(store=f"sqlite:{tmp_path}/gateway.db", state_dir=str(tmp_path / "state"))
        config = write_toml(data, tmp_path / "gateway.toml")
        checked = await anyio.run_process(
            [PYTHON, "-m", "gateway", "check", "--config", str(config)],
            env={**os.environ, "GATEWAY_SECRET_KEY": SECRET},
            check=False,
            cwd=ROOT,
        )
    report = checked.stdout.decode() + checked.stderr.decode()
    assert "backend sends no headers of its own" in report, report
    assert hidden(report) == []
    entries = [json.loads(line) for line in heard.read_text().splitlines()]
    sent = {name for entry in entries for name in entry.get("headers", {})}
    assert sent <= HTTP_HEADERS, sent - HTTP_HEADERS
    assert SECRET not in heard.read_text()
    assert [entry for entry in entries if entry.get("method") == "tools/call"] == []
