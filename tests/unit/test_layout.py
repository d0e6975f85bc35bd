"""Promises about the code's own shape: the write path's decisions load no I/O stack, every error code has one
meaning, and the README's troubleshooting table is the code's table."""

from __future__ import annotations

import json
import subprocess
import sys

from gateway.errors import MEANINGS, Code, markdown_table
from tests.support.processes import ROOT

IO_MODULES = ("httpx", "httpx2", "starlette", "uvicorn", "sqlite3", "redis", "mcp", "mcp.client", "anyio")


def test_the_write_decisions_import_no_io_stack() -> None:
    probe = "import json, sys; import gateway.tools.write_rules; print(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT)
    loaded = set(json.loads(done.stdout))
    assert "gateway.tools.write_rules" in loaded
    assert sorted(loaded & set(IO_MODULES)) == []
    ours = {name for name in loaded if name.startswith("gateway.")}
    allowed = {
        "gateway.config",
        "gateway.records",
        "gateway.errors",
        "gateway.templates",
        "gateway.text",
        "gateway.tools",
    }
    assert {name for name in ours if not name.startswith(("gateway.config.", "gateway.tools."))} <= allowed
    assert {name for name in ours if name.startswith("gateway.tools.")} == {"gateway.tools.write_rules"}


def test_every_error_code_has_a_meaning_and_a_next_step() -> None:
    assert set(MEANINGS) == set(Code)
    assert all(meaning.happened and meaning.next_step for meaning in MEANINGS.values())


def test_the_readme_troubleshooting_table_is_the_codes_table() -> None:
    readme = (ROOT / "README.md").read_text()
    assert markdown_table() in readme, "regenerate the README table: .venv/bin/python -m gateway.errors"
