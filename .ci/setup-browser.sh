#!/usr/bin/env bash
# The approval page's browser tests (tests/system/test_approval_page.py): Debian's Chromium, driven by Playwright
# for Python (a test dependency; it downloads no browser). Installed only when missing.
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then
    chromium --version
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "setup-browser: chromium is missing and installing it needs root (apt-get install chromium)" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends chromium
chromium --version
