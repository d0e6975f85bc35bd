"""The command line answers ``--help`` without loading the heavy stacks (so it answers at once), shows its
defaults, and stops quietly when its reader goes away."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.support.processes import ROOT

HEAVY = ("pydantic", "anyio", "mcp", "mcp_types", "httpx", "httpx2", "starlette", "uvicorn", "opentelemetry", "redis")

PROBE = """
import json, sys
from gateway.cli.main import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""


@pytest.mark.parametrize("words", [["--help"], ["serve", "--help"], ["call", "--help"], ["audit", "list", "--help"]])
def test_help_loads_none_of_the_heavy_stacks(words: list[str]) -> None:
    done = subprocess.run([sys.executable, "-c", PROBE, *words], capture_output=True, text=True, check=True, cwd=ROOT)
    loaded = {name.partition(".")[0] for name in json.loads(done.stderr.strip().splitlines()[-1])}
    assert sorted(loaded & set(HEAVY)) == []
    assert "usage: mcp-safety-gateway" in done.stdout


def help_text(*words: str) -> str:
    done = subprocess.run([sys.executable, "-m", "gateway", *words, "--help"], capture_output=True, text=True, cwd=ROOT)
    return " ".join(done.stdout.split())


def test_help_shows_the_defaults() -> None:
    serve = help_text("serve")
    assert "(default: 8080)" in serve and "(default: 127.0.0.1)" in serve and "(default: the built-in" in serve
    call = help_text("call")
    assert "(default: http://127.0.0.1:8080/mcp)" in call and "(default: GATEWAY_TOKEN)" in call
