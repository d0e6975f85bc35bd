"""The terminal client, driven through a pseudo-terminal against a real gateway: preview, then a reset that
the person at the keyboard confirms (or declines) at the prompt."""

from __future__ import annotations

import hashlib
import json
import os
import re
import select
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from tests.support.configs import config_data, write_config, write_toml
from tests.support.processes import free_port, serve
from tests.support.profiles import TENANTS

pytestmark = pytest.mark.anyio


class Terminal:
    """A command running on a pseudo-terminal: read what it shows, type answers."""

    def __init__(self, args: list[str]) -> None:
        master, slave = os.openpty()
        self.master = master
        self.process = subprocess.Popen(args, stdin=slave, stdout=slave, stderr=slave, close_fds=True)
        os.close(slave)
        self.screen = ""

    def read_until(self, text: str, timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        while text not in self.screen:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"{text!r} never appeared; the screen shows:\n{self.screen}")
            ready, _, _ = select.select([self.master], [], [], remaining)
            if ready:
                try:
                    chunk = os.read(self.master, 4096)
                except OSError:  # the command exited and closed the terminal
                    chunk = b""
                if not chunk and self.process.poll() is not None:
                    raise AssertionError(f"exited before showing {text!r}:\n{self.screen}")
                self.screen += chunk.decode(errors="replace").replace("\r\n", "\n")
        return self.screen

    def type(self, text: str) -> None:
        os.write(self.master, text.encode())

    def finish(self, timeout: float = 60) -> int:
        code = self.process.wait(timeout=timeout)
        while True:
            ready, _, _ = select.select([self.master], [], [], 0.1)
            if not ready:
                break
            try:
                chunk = os.read(self.master, 4096)
            except OSError:
                break
            if not chunk:
                break
            self.screen += chunk.decode(errors="replace").replace("\r\n", "\n")
        os.close(self.master)
        return code


def gateway_call(url: str, *words: str) -> list[str]:
    return [sys.executable, "-m", "gateway", "call", *words, "--url", url]


def run_in_terminal(args: list[str], answer: str | None) -> tuple[int, str]:
    terminal = Terminal(args)
    if answer is not None:
        terminal.read_until("Confirm? [y/N]")
        terminal.type(answer + "\n")
    code = terminal.finish()
    return code, terminal.screen


async def test_a_person_previews_and_confirms_a_reset_from_the_terminal(tmp_path: Path) -> None:
    config, port = write_config(TENANTS, tmp_path), free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    db = tmp_path / "backend.db"
    async with serve(config, port):
        listing = await anyio.run_process(gateway_call(url, "list_tenants", "limit:=2"), check=False)
        assert listing.returncode == 0, listing.stderr
        assert re.search(r"id\s+name\s+rows\s+version\s+protected", listing.stdout.decode())
        assert "nextCursor:" in listing.stdout.decode()

        code, screen = await anyio.to_thread.run_sync(
            run_in_terminal, gateway_call(url, "preview_tenant_reset", "tenantId=tn_checkout01", "fixture=empty"), None
        )
        assert code == 0, screen
        plan_id = re.search(r"planId: (pl_\S+)", screen)
        assert plan_id is not None, screen

        declined_key, key = "terminal-key-declined", "terminal-key-0001"
        code, screen = await anyio.to_thread.run_sync(
            run_in_terminal,
            gateway_call(url, "reset_tenant", f"planId={plan_id.group(1)}", f"idempotencyKey={declined_key}"),
            "n",
        )
        assert code == 1 and "error not_confirmed" in screen
        assert TENANTS.write_count(db) == 0

        # The decline used that plan up: the person previews again, then confirms.
        code, screen = await anyio.to_thread.run_sync(
            run_in_terminal, gateway_call(url, "preview_tenant_reset", "tenantId=tn_checkout01", "fixture=empty"), None
        )
        plan_id = re.search(r"planId: (pl_\S+)", screen)
        assert code == 0 and plan_id is not None, screen
        code, screen = await anyio.to_thread.run_sync(
            run_in_terminal,
            gateway_call(url, "reset_tenant", f"planId={plan_id.group(1)}", f"idempotencyKey={key}"),
            "y",
        )
    assert 'Delete 812 rows in tn_checkout01 and load fixture "empty" (0 rows)?' in screen
    assert code == 0, screen
    assert "replayed: false" in screen and "version: 2" in screen
    assert screen.index("asking the user") < screen.index("calling the backend") < screen.index("done")
    assert TENANTS.write_count(db) == 1


async def test_a_piped_yes_sends_no_write_and_the_plan_stays_usable(tmp_path: Path) -> None:
    """``echo y | mcp-safety-gateway call reset_tenant ...``: stdin is a script, not a person, so the write is not
    even sent (a cancelled prompt would use the plan up); the same plan then writes once for an operator who lets
    a script answer."""
    config, port = write_config(TENANTS, tmp_path), free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    db = tmp_path / "backend.db"

    async def reset_with_piped_yes(plan_id: str, key: str, *flags: str) -> subprocess.CompletedProcess[bytes]:
        reset = gateway_call(url, "reset_tenant", f"planId={plan_id}", f"idempotencyKey={key}", *flags)
        return await anyio.run_process(reset, input=b"y\n", check=False)

    async with serve(config, port):
        words = ("tenantId=tn_checkout01", "fixture=empty")
        preview = await anyio.run_process(gateway_call(url, "preview_tenant_reset", *words), check=False)
        plan = re.search(r"planId: (pl_\S+)", preview.stdout.decode())
        assert plan is not None, preview.stdout
        before = TENANTS.snapshot(db, "tn_checkout01")
        piped = await reset_with_piped_yes(plan.group(1), "piped-key-0001")
        assert piped.returncode == 2 and piped.stdout == b"", piped.stdout
        assert "stdin is not a terminal" in piped.stderr.decode()
        assert "--answers-from-stdin" in piped.stderr.decode()
        assert TENANTS.write_count(db) == 0 and TENANTS.snapshot(db, "tn_checkout01") == before
        allowed = await reset_with_piped_yes(plan.group(1), "piped-key-0001", "--answers-from-stdin")
    assert allowed.returncode == 0, allowed.stderr
    assert "replayed: false" in allowed.stdout.decode()
    assert TENANTS.write_count(db) == 1


READER = "terminal-reader-token"


@pytest.fixture(scope="module")
async def gateways(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[str, str]]:
    """Two real gateways on one backend file: one open (loopback, no auth), one wanting a static token that
    grants reads only; their URLs."""
    tmp = tmp_path_factory.mktemp("terminal")
    open_port, auth_port = free_port(), free_port()
    auth_url = f"http://127.0.0.1:{auth_port}/mcp"
    data = config_data(TENANTS, tmp / "backend.db", *TENANTS.seed_demo, state_dir=tmp / "state")
    open_config = write_toml(data, tmp / "open.toml")
    data["auth"] = {
        "verifier": "static",
        "resource_url": auth_url,
        "tokens": [
            {"sha256": hashlib.sha256(READER.encode()).hexdigest(), "client_id": "r", "scopes": ["tenants:read"]}
        ],
    }
    async with serve(open_config, open_port), serve(write_toml(data, tmp / "auth.toml"), auth_port):
        yield f"http://127.0.0.1:{open_port}/mcp", auth_url


async def terminal(*words: str, token: str | None = None) -> tuple[int, str, str]:
    """The terminal client as a process: exit status, stdout, stderr."""
    env = {key: value for key, value in os.environ.items() if key != "GATEWAY_TOKEN"}
    if token is not None:
        env["GATEWAY_TOKEN"] = token
    done = await anyio.run_process([sys.executable, "-m", "gateway", *words], check=False, env=env)
    return done.returncode, done.stdout.decode(), done.stderr.decode()


def one_or_two_sentences(stderr: str) -> bool:
    lines = stderr.strip().splitlines()
    return 1 <= len(lines) <= 2 and "Traceback" not in stderr


@pytest.mark.parametrize(
    ("case", "words", "token"),
    [
        ("gateway not running", ["call", "list_tenants", "--url", "http://127.0.0.1:{free}/mcp"], None),
        ("wrong URL", ["call", "list_tenants", "--url", "{open_base}/wrong"], None),
        ("no token", ["call", "list_tenants", "--url", "{auth}"], None),
        ("bad token", ["call", "list_tenants", "--url", "{auth}"], "not-a-token"),
        ("unknown tool", ["call", "list_tenant", "--url", "{open}"], None),
        (
            "hidden tool",
            ["call", "reset_tenant", "planId=pl_x", "idempotencyKey=k-12345678", "--url", "{auth}"],
            READER,
        ),
        ("unknown argument", ["call", "list_tenants", "lmit=5", "--url", "{open}"], None),
        ("bad syntax", ["call", "list_tenants", "limit", "--url", "{open}"], None),
    ],
)
async def test_every_terminal_failure_is_one_or_two_sentences_and_exit_2(
    gateways: tuple[str, str], case: str, words: list[str], token: str | None
) -> None:
    open_url, auth_url = gateways
    fill = {"free": free_port(), "open_base": open_url.removesuffix("/mcp"), "auth": auth_url, "open": open_url}
    code, out, err = await terminal(*(word.format(**fill) for word in words), token=token)
    assert code == 2, (case, out, err)
    assert one_or_two_sentences(err), (case, err)
    assert out == ""


async def test_the_terminal_names_what_to_do_for_a_missing_token_and_a_misspelt_tool(
    gateways: tuple[str, str],
) -> None:
    open_url, auth_url = gateways
    _, _, err = await terminal("call", "list_tenants", "--url", auth_url)
    assert "GATEWAY_TOKEN" in err
    _, _, err = await terminal("call", "list_tenant", "--url", open_url)
    assert "list_tenants?" in err and "preview_tenant_reset" in err
    _, _, err = await terminal("call", "reset_tenant", "--url", auth_url, token=READER)
    assert "reset_tenant" in err and "preview_tenant_reset" in err and ", reset_tenant" not in err


async def test_a_typed_word_becomes_the_type_the_input_schema_asks_for(gateways: tuple[str, str]) -> None:
    open_url, _ = gateways
    code, out, err = await terminal("call", "list_tenants", "limit=2", "--url", open_url, "--json")
    assert code == 0, err
    assert len(json.loads(out)["tenants"]) == 2


async def test_tools_lists_each_tool_with_its_annotations_and_arguments(gateways: tuple[str, str]) -> None:
    open_url, auth_url = gateways
    code, out, err = await terminal("tools", "--url", open_url)
    assert code == 0, err
    blocks = {block.split()[0]: block for block in out.strip().split("\n\n")}
    assert set(blocks) == {"list_tenants", "preview_tenant_reset", "reset_tenant"}
    assert "read-only" in blocks["list_tenants"] and "limit: integer, 1..50, default 20" in blocks["list_tenants"]
    assert "destructive" in blocks["reset_tenant"] and "idempotencyKey: string" in blocks["reset_tenant"]
    code, out, _ = await terminal("tools", "--url", auth_url, "--json", token=READER)
    assert code == 0
    assert [json.loads(line)["name"] for line in out.splitlines()] == ["list_tenants", "preview_tenant_reset"]
