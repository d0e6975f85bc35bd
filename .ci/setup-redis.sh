#!/usr/bin/env bash
# redis-server and redis-sentinel for the shared-store tests. The tests start their own servers on free loopback
# ports and stop them afterwards, so nothing is started here: only the binaries are installed (Debian's
# packages), when missing.
set -euo pipefail
if command -v redis-server >/dev/null 2>&1 && command -v redis-sentinel >/dev/null 2>&1; then
    redis-server --version
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "setup-redis: redis-server or redis-sentinel is missing and installing needs root" >&2
    exit 1
fi
# Keep the package's maintainer scripts from starting a daemon (the Docker idiom); removed again on exit.
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' > "$policy"
    chmod +x "$policy"
    trap 'rm -f "$policy"' EXIT
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends redis-server redis-sentinel
redis-server --version
