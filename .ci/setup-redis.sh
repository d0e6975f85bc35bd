#!/usr/bin/env bash
# redis-server for the shared-store tests. The tests start their own server on a free loopback port and stop
# it afterwards, so nothing is started here: only the binary is installed (Debian's package), when missing.
set -euo pipefail
if command -v redis-server >/dev/null 2>&1; then
    redis-server --version
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "setup-redis: redis-server is missing and installing it needs root (apt-get install redis-server)" >&2
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
apt-get install -y --no-install-recommends redis-server
redis-server --version
