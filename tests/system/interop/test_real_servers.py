"""`inspect` against two real third-party servers, pinned in package-lock.json: ``@modelcontextprotocol/server-
filesystem`` (whose ten reads state ``readOnlyHint: true`` and leave ``destructiveHint`` and ``idempotentHint``
out, which the spec says mean nothing for a read) and ``@modelcontextprotocol/server-memory`` (every hint stated).

Their drafts decide nothing and hide nothing: every tool is an entry, each read a read to confirm, each write held
by a TODO, so neither draft loads untouched. Once a person confirms the reads and deletes the writes, `check`
passes and the served gateway relays a read, and the writes are unknown tools."""

from __future__ import annotations

import json
import shlex
import tomllib
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from gateway.config import ConfigError, parse_config
from tests.support.configs import write_toml
from tests.support.processes import PYTHON, ROOT, free_port, serve

pytestmark = pytest.mark.anyio

PACKAGES = Path(__file__).resolve().parent / "node_modules" / "@modelcontextprotocol"
SERVERS = {
    "filesystem": (PACKAGES / "server-filesystem" / "dist" / "index.js", "list_allowed_directories", "move_file"),
    "memory": (PACKAGES / "server-memory" / "dist" / "index.js", "read_graph", "delete_entities"),
}


def claims_read_only(found: dict[str, Any]) -> bool:
    return found["stated_hints"].get("readOnlyHint") is True


def decided(data: dict[str, Any], reads: set[str]) -> dict[str, Any]:
    """The draft as a person completes it here: every read confirmed, every write deleted (kept hidden)."""
    data["tools"] = {name: entry for name, entry in data["tools"].items() if name in reads}
    for entry in data["tools"].values():
        hints = entry["annotations"]
        hints.update(read_only=True, destructive=False)
        if isinstance(hints["idempotent"], str):
            hints["idempotent"] = True
    return data


@pytest.mark.parametrize("server", sorted(SERVERS))
async def test_a_real_servers_draft_shows_its_reads_and_holds_every_write(tmp_path: Path, server: str) -> None:
    script, read, write = SERVERS[server]
    root = tmp_path / "files"
    root.mkdir()
    command = shlex.join(["node", str(script), *([str(root)] if server == "filesystem" else [])])
    draft_file = tmp_path / "draft.toml"
    inspected = await anyio.run_process(
        [PYTHON, "-m", "gateway", "inspect", "--command", command, "--json", "--draft", str(draft_file)],
        check=False,
        cwd=ROOT,
    )
    assert inspected.returncode == 0, inspected.stderr.decode()
    findings = json.loads(inspected.stdout.decode())["tools"]
    reads = {found["name"] for found in findings if claims_read_only(found)}
    writes = {found["name"] for found in findings} - reads
    assert read in reads and write in writes
    data = tomllib.loads(draft_file.read_text())
    assert set(data["tools"]) == reads | writes  # nothing hidden
    for name in reads:
        assert "a read to confirm" in data["tools"][name]["annotations"]["read_only"]
    with pytest.raises(ConfigError) as undecided:
        parse_config(data)
    for name in writes:  # every write waits for a person
        assert f"tools.{name}.annotations.read_only: still a TODO" in str(undecided.value)
    data = decided(data, reads)
    data["gateway"].update(store=f"sqlite:{tmp_path}/gateway.db", state_dir=str(tmp_path / "state"))
    data["backend"]["env"] = {"MEMORY_FILE_PATH": str(tmp_path / "memory.jsonl")}
    config = write_toml(data, tmp_path / "gateway.toml")
    checked = await anyio.run_process([PYTHON, "-m", "gateway", "check", "--config", str(config)], check=False)
    assert checked.returncode == 0, checked.stdout.decode() + checked.stderr.decode()
    port = free_port()
    async with serve(config, port), Client(f"http://127.0.0.1:{port}/mcp") as client:
        listed = {tool.name for tool in (await client.list_tools()).tools}
        answer = await client.call_tool(read, {})
        with pytest.raises(MCPError):
            await client.call_tool(write, {})
    assert listed == reads
    assert not answer.is_error and answer.structured_content is not None, answer.content
