"""``serve`` started as hosts start it: from the filesystem root, without the venv on PATH, on a port already in
use. State lands beside the config, the flag demo runs with the gateway's own interpreter, and a busy port is one
sentence."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.support.clients import Answers, new_key, preview
from tests.support.processes import HOST, ROOT, free_port
from tests.support.profiles import FLAGS, TENANTS

pytestmark = pytest.mark.anyio

BARE_PATH = "/usr/bin:/bin"
"""A host's PATH: no venv on it."""


def stdio_gateway(config: Path) -> StdioServerParameters:
    """``serve --stdio`` started the way a desktop host starts it: in ``/``, with a bare PATH."""
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "gateway", "serve", "--stdio", "--config", str(config)],
        cwd="/",
        env={"PATH": BARE_PATH},
    )


async def test_serve_started_in_the_filesystem_root_keeps_its_state_beside_the_config(tmp_path: Path) -> None:
    folder = tmp_path / "conf"
    await anyio.run_process([sys.executable, "-m", "gateway", "init", str(folder)])
    answers = Answers()
    with (tmp_path / "stderr.log").open("w") as errlog:
        params = stdio_gateway(folder / "gateway.toml")
        async with Client(stdio_client(params, errlog=errlog), mode="legacy", elicitation_callback=answers) as client:
            plan = await preview(client, TENANTS)
            done = await client.call_tool(TENANTS.write_tool, {"planId": plan["planId"], "idempotencyKey": new_key()})
    assert not done.is_error, done.content
    state = folder / "var"
    assert {"gateway.db", "legacy.db", "secret.key"} <= {path.name for path in state.iterdir()}
    assert TENANTS.write_count(state / "legacy.db") == 1
    assert f"state: store sqlite:{state}/gateway.db" in (tmp_path / "stderr.log").read_text()


async def test_the_flags_config_runs_from_any_directory_with_the_gateways_own_interpreter(tmp_path: Path) -> None:
    config = tmp_path / "flags.toml"
    shutil.copy(ROOT / "config" / "flags.toml", config)
    with (tmp_path / "stderr.log").open("w") as errlog:
        params = stdio_gateway(config)
        async with Client(stdio_client(params, errlog=errlog), mode="legacy", elicitation_callback=Answers()) as client:
            plan = await preview(client, FLAGS)
            done = await client.call_tool(FLAGS.write_tool, {"planId": plan["planId"], "idempotencyKey": new_key()})
    assert not done.is_error, done.content
    assert FLAGS.write_count(tmp_path / "var" / "flags.db") == 1


def test_a_port_already_in_use_is_one_sentence_before_anything_starts(tmp_path: Path) -> None:
    port = free_port()
    with socket.socket() as taken:
        taken.bind((HOST, port))
        taken.listen()
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "gateway",
                "serve",
                "--config",
                str(ROOT / "config" / "flags.toml"),
                "--port",
                str(port),
            ],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=tmp_path,
        )
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and str(port) in lines[0], done.stderr
    assert "listening" not in done.stderr
