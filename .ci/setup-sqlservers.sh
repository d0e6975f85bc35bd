#!/usr/bin/env bash
# Statement-executing MCP servers for tests/system/sqlservers: @bytebase/dbhub from npm, exactly as pinned in
# tests/system/sqlservers/package-lock.json, and mcp-alchemy from PyPI in its own virtualenv (it pins its own mcp
# and SQLAlchemy, which must not replace the project's), remade when its pin changes.
#
# A lock of its own rather than the interop one: dbhub's optional dependencies (drivers for MySQL, SQL Server,
# Oracle, cloud credential SDKs) are some 300 packages the interop install would then carry, and that install
# keeps optional dependencies for its bundled Node 22. Here they are omitted and the PostgreSQL driver is pinned
# directly. --ignore-scripts: dbhub runs without any (ssh2's optional native crypto is not needed).
set -euo pipefail
cd "$(dirname "$0")/.."
here=tests/system/sqlservers
if ! command -v npm >/dev/null; then
    echo "npm not found: .ci/setup-node.sh installs node and npm" >&2
    exit 1
fi
(cd "$here" && npm ci --ignore-scripts --omit=optional --no-audit --no-fund --loglevel=error)
echo "dbhub $(node -p "require('./$here/node_modules/@bytebase/dbhub/package.json').version")"
venv=$here/.venv-alchemy
pins=$here/alchemy-requirements.txt
if [ ! -x "$venv/bin/python" ] || [ ! -f "$venv/.installed" ] || [ "$pins" -nt "$venv/.installed" ]; then
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$pins"
    touch "$venv/.installed"
fi
"$venv/bin/python" -c "import importlib.metadata as m; print(*(f\"{p} {m.version(p)}\" for p in (\"mcp-alchemy\", \"mcp\", \"sqlalchemy\")))"
