"""``audit list`` as a pipe's writer: ISO 8601 times in JSON too, and a reader that stops early (``| head``)
ends it quietly."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from gateway.records import AuditEntry
from gateway.stores.sqlite.store import SqliteStore
from tests.support.configs import config_data, write_toml
from tests.support.profiles import TENANTS

ENTRIES = 2000
"""Enough table to overflow a pipe's buffer, so the writer is still writing when the reader leaves."""


async def fill(store: Path) -> None:
    sqlite = SqliteStore(store)
    try:
        for n in range(ENTRIES):
            entry = AuditEntry(at=1_796_000_000.25 + n, caller="local", tool="reset_tenant", outcome="applied")
            await sqlite.append_audit(entry)
    finally:
        await sqlite.close()


@pytest.fixture
def config(tmp_path: Path) -> Path:
    """A config whose SQLite store holds many audit entries."""
    store = tmp_path / "gateway.db"
    anyio.run(fill, store)
    data = config_data(TENANTS, tmp_path / "backend.db", store=f"sqlite:{store}", state_dir=tmp_path)
    return write_toml(data, tmp_path / "gateway.toml")


def test_audit_list_json_gives_times_in_iso_8601(config: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "gateway", "audit", "list", "--json", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    first = json.loads(done.stdout.splitlines()[0])
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", first["at"])


@pytest.mark.parametrize("words", [[], ["--json"]])
def test_audit_list_into_a_reader_that_stops_early_ends_quietly(config: Path, words: list[str]) -> None:
    writer = subprocess.Popen(
        [sys.executable, "-m", "gateway", "audit", "list", *words, "--config", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert writer.stdout is not None and writer.stderr is not None
    assert writer.stdout.readline()  # like `head -1`: one line, then the reader goes away
    writer.stdout.close()
    assert writer.wait(timeout=120) == 0
    assert writer.stderr.read() == b""
