"""A desktop host's gateway: ``serve --stdio`` started from ``/`` as Claude Desktop starts it, on the config ``init``
writes with ``confirm = "url"`` and an approver token switched on, no Redis and no second process. The stdio
process serves the approval page itself on a free loopback port; the agent (a real SDK client over stdio) gets the
link, a person signs in with the token in Chromium and approves, and exactly one write happens, in both eras."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.support import browser
from tests.support.clients import error_body, error_code, new_key, preview
from tests.support.processes import ROOT
from tests.support.profiles import TENANTS

pytestmark = pytest.mark.anyio
TOKEN = "desktop-approver-token-0123456789abcdef"


@pytest.fixture(scope="module", autouse=True)
def chromium_installed() -> None:
    if not browser.available():
        if os.environ.get("CI"):
            pytest.fail(f"the desktop approval test must run in CI: {browser.MISSING}")
        pytest.skip(browser.MISSING)


def desktop_config(folder: Path) -> Path:
    """``mcp-safety-gateway init``'s config, edited as the README says: url mode on, one approver token."""
    done = subprocess.run(
        [sys.executable, "-m", "gateway", "init", str(folder)], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    path = folder / "gateway.toml"
    text = path.read_text()
    text = text.replace('confirm = "form"  ', 'confirm = "url"   ', 1)
    text = text.replace("# [approvals]  ", "[approvals]    ", 1).replace('# login = "tokens"', 'login = "tokens"', 1)
    text = text.replace("# [[approvals.tokens]]", "[[approvals.tokens]]", 1)
    text = re.sub(r'# sha256 = "…"', f'sha256 = "{hashlib.sha256(TOKEN.encode()).hexdigest()}"', text, count=1)
    text = text.replace('# subject = "bob"', 'subject = "bob"', 1)
    path.write_text(text)
    return path


async def test_a_stdio_gateway_serves_its_own_approval_page_and_writes_once(tmp_path: Path, era: str) -> None:
    config = desktop_config(tmp_path / "tenants-gateway")
    server = StdioServerParameters(
        command=sys.executable, args=["-m", "gateway", "serve", "--stdio", "--config", str(config)], cwd="/"
    )
    links: list[str] = []
    async with browser.chromium() as chrome:

        async def person_approves(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
            assert isinstance(params, types.ElicitRequestURLParams)
            links.append(params.url)
            page = await (await chrome.new_context()).new_page()
            await page.goto(params.url)
            await page.fill("input[name=token]", TOKEN)
            await page.click("button[type=submit]")
            await page.wait_for_url(params.url + "*")
            await page.click("button.approve")
            await page.wait_for_load_state()
            return types.ElicitResult(action="accept")

        mode = "legacy" if era == "2025-11-25" else "auto"
        with (tmp_path / "stderr.log").open("w") as errlog:
            agent = Client(stdio_client(server, errlog=errlog), mode=mode, elicitation_callback=person_approves)
            async with agent as client:
                plan = await preview(client, TENANTS)
                args = {"planId": plan["planId"], "idempotencyKey": new_key()}
                written = await client.call_tool("reset_tenant", args)
    logged = (tmp_path / "stderr.log").read_text()
    page = re.search(r"approval page at (http://127\.0\.0\.1:\d+)/approvals", logged)
    assert page is not None, logged[-2000:]
    assert not written.is_error, written.content
    assert len(links) == 1 and links[0].startswith(page.group(1) + "/approvals/ap_")
    state = tmp_path / "tenants-gateway" / "var"  # relative to the config's folder, whatever the working directory
    assert TENANTS.write_count(state / "legacy.db") == 1


async def test_the_approval_page_keeps_its_port_when_the_host_restarts_the_gateway(tmp_path: Path) -> None:
    """A desktop host restarts its stdio gateway whenever it likes: a link shown before the restart still opens
    the page after it, because the port is kept in the state directory."""
    config = desktop_config(tmp_path / "tenants-gateway")
    server = StdioServerParameters(
        command=sys.executable, args=["-m", "gateway", "serve", "--stdio", "--config", str(config)], cwd="/"
    )
    links: list[str] = []
    answers: list[int] = []
    for start in range(2):
        with (tmp_path / f"stderr-{start}.log").open("w") as errlog:
            async with Client(stdio_client(server, errlog=errlog), mode="legacy") as client:  # no url elicitation
                plan = await preview(client, TENANTS)
                waiting = await client.call_tool(
                    "reset_tenant", {"planId": plan["planId"], "idempotencyKey": new_key()}
                )
                assert error_code(waiting) == "approval_pending"
                links.append(error_body(waiting)["details"]["url"])
                async with httpx.AsyncClient(timeout=30) as http:
                    answers.append((await http.get(links[0])).status_code)  # the first link, at this start
    assert urlsplit(links[0]).port == urlsplit(links[1]).port
    assert answers == [303, 303]  # off to sign in, before and after the restart: the page answers
    assert (tmp_path / "tenants-gateway" / "var" / "approval-page.port").read_text().strip() == str(
        urlsplit(links[0]).port
    )
    assert TENANTS.write_count(tmp_path / "tenants-gateway" / "var" / "legacy.db") == 0
