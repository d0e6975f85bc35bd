"""The terminal client in url mode, at a real pseudo-terminal against a real gateway: ``call reset_tenant`` prints the
approval page's link and waits with a countdown; people approve on the page (here through the approvers' API with
bob's token) and the write runs once; Ctrl-C ends the wait, says nothing was written, and the gateway stops waiting
too (an approval given afterwards writes nothing until the same command runs again)."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import httpx
import pytest
from mcp import Client

from gateway.approvals.lifecycle import approval_id_for
from tests.support.approvals import TOKENS, token_page_data
from tests.support.clients import new_key, preview
from tests.support.configs import write_toml
from tests.support.processes import free_port, serve
from tests.support.profiles import TENANTS
from tests.support.terminal import AtTerminal

pytestmark = pytest.mark.anyio
COUNTDOWN = re.compile(r"(\d+:\d\d) left \(Ctrl-C stops waiting\)")


@dataclass
class Served:
    base: str
    db: Path


@pytest.fixture(scope="module")
async def served(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Served]:
    tmp = tmp_path_factory.mktemp("terminal-approval")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    config = write_toml(token_page_data(TENANTS, tmp, base, timeout=60), tmp / "gateway.toml")
    async with serve(config, port):
        yield Served(base, tmp / "backend.db")


async def planned(served: Served, target: str) -> list[str]:
    """The words of a reset of ``target`` for the terminal client: a fresh plan and key."""
    async with Client(f"{served.base}/mcp") as client:
        plan = await preview(client, TENANTS, target)
    return [
        TENANTS.write_tool,
        f"planId={plan['planId']}",
        f"idempotencyKey={new_key()}",
        "--url",
        f"{served.base}/mcp",
    ]


def at_terminal(words: list[str]) -> AtTerminal:
    env = {key: value for key, value in os.environ.items() if key != "GATEWAY_TOKEN"}
    return AtTerminal([sys.executable, "-m", "gateway", "call", *words], env)


async def bob_approves(served: Served, words: list[str]) -> None:
    approval_id = approval_id_for(words[1].removeprefix("planId="))
    async with httpx.AsyncClient(base_url=served.base) as http:
        answer = await http.post(
            f"/approvals/api/{approval_id}",
            json={"decision": "approve"},
            headers={"Authorization": f"Bearer {TOKENS['bob']}"},
        )
    assert answer.status_code == 200, answer.text


async def test_the_terminal_shows_the_link_counts_down_and_writes_once_approved(served: Served) -> None:
    words = await planned(served, TENANTS.main)
    before = TENANTS.write_count(served.db)
    terminal = at_terminal(words)
    await anyio.to_thread.run_sync(terminal.read_until, "Approve it on the page:")
    link = f"{served.base}/approvals/{approval_id_for(words[1].removeprefix('planId='))}"
    await anyio.to_thread.run_sync(terminal.read_until, link)
    await anyio.to_thread.run_sync(terminal.read_until, "left (Ctrl-C stops waiting)")
    assert re.search(r"\(facts digest (?:[0-9a-f]{4} ){3}[0-9a-f]{4}: the page shows the same\)", terminal.screen)
    first = COUNTDOWN.findall(terminal.screen)[-1]
    await anyio.to_thread.run_sync(terminal.read_until, "left (Ctrl-C stops waiting)", 5)
    with anyio.fail_after(10):
        while COUNTDOWN.findall(terminal.screen)[-1] == first:  # the countdown moves while nobody has decided
            await anyio.to_thread.run_sync(terminal.read, 0.5)
    assert TENANTS.write_count(served.db) == before
    await bob_approves(served, words)
    code, screen = await anyio.to_thread.run_sync(terminal.finish)
    assert code == 0, screen
    assert "Confirm? [y/N]" not in screen  # nobody at the keyboard is asked: the page decides
    assert "replayed: false" in screen
    assert TENANTS.write_count(served.db) == before + 1


async def test_ctrl_c_ends_the_wait_says_nothing_was_written_and_the_same_command_writes_once_later(
    served: Served,
) -> None:
    words = await planned(served, TENANTS.other)
    before = TENANTS.write_count(served.db), TENANTS.snapshot(served.db, TENANTS.other)
    terminal = at_terminal(words)
    await anyio.to_thread.run_sync(terminal.read_until, "left (Ctrl-C stops waiting)")
    terminal.interrupt()
    code, screen = await anyio.to_thread.run_sync(terminal.finish)
    assert code == 130, screen
    assert "stopped waiting; nothing was written: the write still waits for approval at" in screen
    assert "Traceback" not in screen
    await bob_approves(served, words)
    await anyio.sleep(2)  # the gateway looks at the store every 0.5 s: a wait it had not given up would write now
    assert (TENANTS.write_count(served.db), TENANTS.snapshot(served.db, TENANTS.other)) == before
    again = at_terminal(words)
    code, screen = await anyio.to_thread.run_sync(again.finish)
    assert code == 0 and "replayed: false" in screen, screen
    assert TENANTS.write_count(served.db) == before[0] + 1


@pytest.mark.parametrize(
    ("case", "token", "url", "names", "way_out"),
    [
        ("no token", None, "http://127.0.0.1:{free}", "GATEWAY_APPROVER_TOKEN", "export GATEWAY_APPROVER_TOKEN="),
        ("no gateway", "a-token", "http://127.0.0.1:{free}", "http://127.0.0.1:{free}", "--url"),
        ("the MCP endpoint", "a-token", "{served}/mcp", "{served}/mcp", "without /mcp"),
    ],
)
async def test_approvals_list_names_what_is_missing_and_the_way_out(
    served: Served, case: str, token: str | None, url: str, names: str, way_out: str
) -> None:
    fill = {"free": free_port(), "served": served.base}
    env = {key: value for key, value in os.environ.items() if key != "GATEWAY_APPROVER_TOKEN"}
    if token is not None:
        env["GATEWAY_APPROVER_TOKEN"] = token
    command = [sys.executable, "-m", "gateway", "approvals", "list", "--url", url.format(**fill)]
    done = await anyio.run_process(command, check=False, env=env)
    said = done.stderr.decode()
    assert done.returncode == 2 and done.stdout == b"", (case, said)
    assert names.format(**fill) in said and way_out in said, (case, said)
    assert "Traceback" not in said and len(said.strip().splitlines()) == 1, (case, said)
