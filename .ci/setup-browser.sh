#!/usr/bin/env bash
# The approval page's browser tests (tests/system/test_approval_page.py): Debian's Chromium, driven by Playwright
# for Python (a test dependency; it downloads no browser). Installed only when missing.
set -euo pipefail
if ! command -v chromium >/dev/null 2>&1; then
    "$(dirname "$0")/apt-install" setup-browser chromium
fi
chromium --version
