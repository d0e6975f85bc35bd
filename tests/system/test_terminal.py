"""The terminal client, driven through a pseudo-terminal against a real gateway: preview, then a reset that
the person at the keyboard confirms (or declines) at the prompt."""

from __future__ import annotations

import os
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

from tests.support.configs import write_config
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
    assert TENANTS.write_count(db) == 1
