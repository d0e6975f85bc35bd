#!/usr/bin/env bash
# The fastmcp client for the interop tests (tests/system/interop/test_interop.py): fastmcp and fastmcp-tasks from
# PyPI, pinned in tests/system/interop/fastmcp-requirements.txt, in their own virtualenv (fastmcp pins its own mcp,
# which must not replace the project's). Made once; remade when the pins change.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=tests/system/interop/.venv-fastmcp
pins=tests/system/interop/fastmcp-requirements.txt
if [ ! -x "$venv/bin/python" ] || [ ! -f "$venv/.installed" ] || [ "$pins" -nt "$venv/.installed" ]; then
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$pins"
    touch "$venv/.installed"
fi
"$venv/bin/python" -c "import importlib.metadata as m; print(*(f\"{p} {m.version(p)}\" for p in (\"fastmcp\", \"fastmcp-tasks\", \"mcp\")))"
