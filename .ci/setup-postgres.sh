#!/usr/bin/env bash
# PostgreSQL's server binaries for the PostgreSQL store's tests and benchmark. The tests start their own
# throwaway server (initdb + pg_ctl in a temporary directory, as the unprivileged user nobody, since the server
# refuses to run as root) on a free loopback port and stop it afterwards, so nothing is started here: only the
# binaries are installed (Debian's package), when missing.
set -euo pipefail
if ! ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1; then
    "$(dirname "$0")/apt-install" setup-postgres postgresql
fi
ls /usr/lib/postgresql/*/bin/postgres
