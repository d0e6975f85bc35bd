"""The node tools every interop module needs: ``node`` on PATH and the pinned ``node_modules``
(``cd tests/system/interop && npm ci``). Locally a module skips without them; in CI (``CI`` set) it fails
instead, since ``.ci/setup-node.sh`` installs both. ``chromium``: one headless browser per module, for the people
who approve on the gateway's page."""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import browser

INTEROP = Path(__file__).resolve().parent
NODE_MODULES = INTEROP / "node_modules"


def _missing_tools() -> str | None:
    if shutil.which("node") is None:
        return "node is not on PATH (install Node 20+, then: cd tests/system/interop && npm ci)"
    if not (NODE_MODULES / ".package-lock.json").is_file():
        return "tests/system/interop/node_modules is missing (cd tests/system/interop && npm ci, or .ci/setup-node.sh)"
    return None


@pytest.fixture(scope="module", autouse=True)
def node_tools() -> None:
    missing = _missing_tools()
    if missing is None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"interop tests must run in CI: {missing}")
    pytest.skip(missing)


@pytest.fixture(scope="module")
async def chromium() -> AsyncIterator[Any]:
    """One headless Chromium for the module's approvers."""
    if not browser.available():
        if os.environ.get("CI"):
            pytest.fail(f"interop tests must run in CI: {browser.MISSING}")
        pytest.skip(browser.MISSING)
    async with browser.chromium() as launched:
        yield launched
