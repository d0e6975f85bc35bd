"""What a fresh interpreter loads: the write path's decisions load no I/O stack, and tracing off loads no SDK.

Each probe imports a module in a new ``sys.executable`` (the test process has loaded everything already).
"""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support.processes import ROOT

IO_MODULES = ("httpx", "httpx2", "starlette", "uvicorn", "sqlite3", "redis", "mcp", "mcp.client", "anyio")


def loaded_by(statements: str) -> set[str]:
    """The modules a fresh interpreter has loaded after running the statements."""
    probe = f"import json, sys; {statements}; print(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT)
    return set(json.loads(done.stdout))


def test_the_write_decisions_import_no_io_stack() -> None:
    loaded = loaded_by("import gateway.write.steps")
    assert "gateway.write.steps" in loaded
    assert sorted(loaded & set(IO_MODULES)) == []
    ours = {name for name in loaded if name.startswith("gateway.")}
    allowed = {
        "gateway.config",
        "gateway.records",
        "gateway.errors",
        "gateway.config.expressions",
        "gateway.text",
        "gateway.write",
    }
    assert {name for name in ours if not name.startswith(("gateway.config.", "gateway.write."))} <= allowed
    assert {name for name in ours if name.startswith("gateway.write.")} == {"gateway.write.steps"}


def test_with_tracing_off_neither_the_sdk_nor_the_exporter_is_imported() -> None:
    loaded = loaded_by(
        "from gateway.observability import tracing; from gateway.mcp import server; tracing.configure('gw', {})"
    )
    assert not [name for name in loaded if name.startswith(("opentelemetry.sdk", "opentelemetry.exporter"))]
