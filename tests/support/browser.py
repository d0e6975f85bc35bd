"""A real browser for the approval page: Debian's Chromium driven by Playwright (no browser download).

``chromium`` comes from the distribution (CI installs it with .ci/setup-browser.sh); Playwright only drives it.
The flags keep a sandboxed, root-run, offline Chromium quiet (no background fetches towards the internet).
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

MISSING = "chromium or playwright is missing (CI installs them: .ci/setup-browser.sh, pip .[test])"
FLAGS = [
    "--no-sandbox",
    "--disable-dev-shm-usage",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def available() -> bool:
    """Whether a Chromium and Playwright are installed."""
    try:
        import playwright  # noqa: F401
    except ImportError:
        return False
    return shutil.which("chromium") is not None


@asynccontextmanager
async def chromium() -> AsyncIterator[Any]:
    """A headless Chromium (a Playwright Browser)."""
    from playwright.async_api import async_playwright

    async with async_playwright() as driver:
        browser = await driver.chromium.launch(executable_path=shutil.which("chromium"), args=FLAGS)
        try:
            yield browser
        finally:
            await browser.close()


async def sign_in_at_provider(page: Any, person: str) -> None:
    """On the identity provider's own login and consent pages (oidc-provider's dev interactions): sign in."""
    await page.fill("input[name=login]", person)
    await page.fill("input[name=password]", "any")
    await page.click("button[type=submit]")
    if await page.locator("button[type=submit]").count() and "/approvals" not in page.url:
        await page.click("button[type=submit]")  # the consent page
