#!/usr/bin/env bash
# redis-server and redis-sentinel for the shared-store tests. The tests start their own servers on free loopback
# ports and stop them afterwards, so nothing is started here: only the binaries are installed (Debian's
# packages), when missing.
set -euo pipefail
if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-sentinel >/dev/null 2>&1; then
    "$(dirname "$0")/apt-install" setup-redis redis-server redis-sentinel
fi
redis-server --version
