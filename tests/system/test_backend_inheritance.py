"""What a stdio backend child gets from a real ``serve``: its stdin, stdout and stderr, and an environment of
``PATH``, ``HOME`` and the like plus ``[backend] env``; nothing else. A backend is code the gateway does not trust:
no descriptor the gateway holds or inherited (its listening socket, its store's file, a pipe its own parent left
open) may reach it, and no secret of the gateway's environment.

The backend here is a wrapper that writes down what it was given, then becomes the legacy backend (``exec`` keeps
every descriptor it inherited), so the gateway serves normally over it."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.clients import ENVELOPE, POST_HEADERS
from tests.support.configs import config_data, write_toml
from tests.support.processes import free_port, serve
from tests.support.profiles import TENANTS

pytestmark = pytest.mark.anyio

WRAPPER = """
import json, os, sys
record, command = sys.argv[1], sys.argv[2:]
held = []
for fd in range(3, 1024):
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        continue
    held.append({"fd": fd, "mode": mode})
with open(record, "w") as out:
    json.dump({"fds": held, "env": dict(os.environ)}, out)
os.execv(command[0], command)
"""
SECRETS = {
    "GATEWAY_SECRET_KEY": "k" * 64,
    "GATEWAY_STORE_PASSWORD": "store-password",
    "HOST_API_TOKEN": "the-host's-token",
}
"""In the gateway's environment: none of these may reach the backend."""


async def test_a_stdio_backend_gets_its_stdio_and_the_configured_environment_only(tmp_path: Path) -> None:
    wrapper, record = tmp_path / "wrapper.py", tmp_path / "inherited.json"
    wrapper.write_text(WRAPPER)
    data = config_data(TENANTS, tmp_path / "backend.db", *TENANTS.seed_demo, state_dir=tmp_path / "state")
    data["gateway"]["store"] = f"sqlite:{tmp_path}/gateway.db"  # a file the gateway holds open
    backend = data["backend"]
    backend["args"] = [str(wrapper), str(record), backend["command"], *backend["args"]]
    backend["command"] = sys.executable
    backend["env"] = {**backend.get("env", {}), "BACKEND_SETTING": "configured"}
    config, port = write_toml(data, tmp_path / "gateway.toml"), free_port()
    left_open, other_end = os.pipe()  # what the gateway's own parent left open for it, inheritable
    os.set_inheritable(left_open, True)
    try:
        environment = {**os.environ, **SECRETS}
        async with serve(config, port, pass_fds=(left_open,), env=environment):
            answer = await _read_a_page(port)
    finally:
        os.close(left_open)
        os.close(other_end)
    assert answer["result"]["structuredContent"]["tenants"]  # the backend served, wrapped
    inherited: dict[str, Any] = json.loads(record.read_text())
    assert inherited["fds"] == [], [(each["fd"], stat.filemode(each["mode"])) for each in inherited["fds"]]
    env = inherited["env"]
    assert env["BACKEND_SETTING"] == "configured"
    assert not set(SECRETS) & set(env)
    assert not [name for name, value in env.items() if value in SECRETS.values()]


async def _read_a_page(port: int) -> dict[str, Any]:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": TENANTS.list_tool, "arguments": {}, "_meta": ENVELOPE},
    }
    headers = {**POST_HEADERS, "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call"}
    headers["Mcp-Name"] = TENANTS.list_tool
    async with httpx.AsyncClient(timeout=30) as http:
        response = await http.post(f"http://127.0.0.1:{port}/mcp", json=body, headers=headers)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer
