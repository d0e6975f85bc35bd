"""What only some gateways need is imported only by them, each worth a few MiB of every worker's resident memory:
the SQL parsers (sqlglot for SQLite, pglast for PostgreSQL, together about 11 MiB) by a config with statement
tools, PyJWT by a JWT verifier or the page's sign-in, httpx (with the rich and pygments of its command line, about
4 MiB) by a webhook, an introspection or a key set to fetch, fido2 by a passkey to check, and jsonschema (with its
attrs and referencing, about 3 MiB) by a call to refuse or a schema outside the compiled subset. A config with
statement tools imports its dialect's parser as it is read, so a gateway that starts has its parser, and the
first statement pays no import.

What a real ``serve`` imported is what ``python -X importtime`` writes to stderr, one line per module, whenever
it is imported."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.support.clients import ENVELOPE, POST_HEADERS
from tests.support.configs import config_data, write_toml
from tests.support.processes import PYTHON, ROOT, free_port, process
from tests.support.profiles import TENANTS

pytestmark = pytest.mark.anyio

ON_DEMAND = (
    "sqlglot",
    "pglast",
    "jwt",
    "httpx",
    "rich",
    "pygments",
    "fido2",
    "jsonschema",
    "referencing",
    "attr",
    "attrs",
)
"""Packages the demo gateway (static tokens or none, no statement tools, no webhooks, no passkeys) never imports
while its calls are valid."""


def imported(importtime: str) -> set[str]:
    """The modules ``-X importtime`` reported: its lines are ``import time: self | cumulative | name``."""
    names = set()
    for line in importtime.splitlines():
        if line.startswith("import time:") and line.count("|") == 2:
            names.add(line.rsplit("|", 1)[1].strip())
    return names


def on_demand(modules: set[str]) -> set[str]:
    return {name for name in modules if name.split(".")[0] in ON_DEMAND}


async def test_a_gateway_without_statements_webhooks_jwts_or_passkeys_imports_none_of_those(tmp_path: Path) -> None:
    data = config_data(TENANTS, tmp_path / "backend.db", *TENANTS.seed_demo, state_dir=tmp_path / "state")
    config, port, log = write_toml(data, tmp_path / "gateway.toml"), free_port(), tmp_path / "serve.log"
    args = [PYTHON, "-X", "importtime", "-m", "gateway", "serve", "--config", str(config), "--port", str(port)]
    with log.open("w") as stderr:
        async with process(args, port, stderr=stderr, cwd=ROOT), httpx.AsyncClient(timeout=30) as http:
            for name, arguments in [
                (TENANTS.list_tool, {}),
                (TENANTS.preview_tool, TENANTS.preview_args()),
            ]:
                body = {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "tools/call",
                    "params": {"name": name, "arguments": arguments, "_meta": ENVELOPE},
                }
                headers = {**POST_HEADERS, "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call"}
                response = await http.post(
                    f"http://127.0.0.1:{port}/mcp", json=body, headers={**headers, "Mcp-Name": name}
                )
                assert response.status_code == 200, response.text
                assert "structuredContent" in response.json()["result"], response.text
    modules = imported(log.read_text())
    assert {
        "gateway.mcp.server",
        "gateway.statements.analysis",
        "gateway.tools.kinds.statement_execute",
        "gateway.identity.verifiers",
        "gateway.audit.sinks",
        "gateway.approvals.notify",
        "gateway.approvals.passkeys",
    } <= modules
    assert on_demand(modules) == set()


def test_a_config_with_statement_tools_imports_its_dialects_parser_as_it_is_read() -> None:
    script = (
        "import sys\n"
        "from gateway.config import load_config\n"
        "def held(): return sorted({m.split('.')[0] for m in sys.modules} & {'sqlglot', 'pglast'})\n"
        "before = held()\n"
        "load_config(sys.argv[1])\n"
        "print(before, held())\n"
    )
    config = ROOT / "config" / "dbhub" / "gateway.toml"  # PostgreSQL's dialect
    done = subprocess.run(
        [sys.executable, "-c", script, str(config)], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.split() == ["[]", "['pglast']"], done.stdout + done.stderr
