"""The audit trail: one chained entry per write decision, listed and verified by the CLI, and a tampered
SQLite file is caught and named."""

from __future__ import annotations

import json
import logging
import sqlite3
import subprocess
import sys
import unicodedata
from pathlib import Path
from typing import Any

import pytest

from gateway.config import parse_config
from gateway.errors import StoreUnavailable
from gateway.text import HIDDEN, printable
from tests.support.approvals import approved_pending_write, page_data
from tests.support.clients import Answers, connect, new_key, preview, running_gateway
from tests.support.configs import config_data, write_toml
from tests.support.profiles import TENANTS

pytestmark = pytest.mark.anyio


def cli(config: Path, *words: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gateway", "audit", *words, "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


async def write_trail(tmp_path: Path, audit_key: str | None = None) -> tuple[Path, Path]:
    """A gateway on a SQLite store applies, replays and refuses writes (``audit_key``: its GATEWAY_AUDIT_KEY, else
    the key file in its state directory); its config file and store."""
    store = tmp_path / "gateway.db"
    data = config_data(
        TENANTS, tmp_path / "backend.db", *TENANTS.seed_demo, store=f"sqlite:{store}", state_dir=tmp_path
    )
    with pytest.MonkeyPatch.context() as patch:
        if audit_key is not None:
            patch.setenv("GATEWAY_AUDIT_KEY", audit_key)
        async with running_gateway(parse_config(data)) as gw:
            async with connect(gw, "2025-11-25", Answers()) as client:
                args = {"planId": (await preview(client, TENANTS))["planId"], "idempotencyKey": new_key()}
                await client.call_tool("reset_tenant", args)
                await client.call_tool("reset_tenant", args)
                other = await preview(client, TENANTS, target=TENANTS.other)
            async with connect(gw, "2026-07-28", Answers("decline")) as client:
                await client.call_tool("reset_tenant", {"planId": other["planId"], "idempotencyKey": new_key()})
    return write_toml(data, tmp_path / "gateway.toml"), store


@pytest.fixture
async def trail(tmp_path: Path) -> tuple[Path, Path]:
    """A gateway on a SQLite store that applied, replayed and refused writes; its config file and store."""
    return await write_trail(tmp_path)


async def test_every_decision_is_listed_and_the_chain_verifies(trail: tuple[Path, Path]) -> None:
    config, _ = trail
    listed = cli(config, "list")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0].split()[:6] == ["seq", "time", "caller", "tool", "target", "outcome"]
    assert [line.split()[5] for line in lines[1:]] == ["applied", "replayed", "refused:not_confirmed"]
    only = cli(config, "list", "--tenant", TENANTS.other, "--json")
    entries = [json.loads(line) for line in only.stdout.splitlines()]
    assert [(e["target"], e["outcome"], e["code"], e["confirmation"]) for e in entries] == [
        (TENANTS.other, "refused", "not_confirmed", "decline")
    ]
    assert cli(config, "list", "--since", "2999-01-01T00:00:00Z").stdout.splitlines()[1:] == []
    verified = cli(config, "verify")
    assert verified.returncode == 0 and verified.stdout.startswith("ok    3 entries, chain intact")


def tamper(store: Path, sql: str, *params: Any) -> None:
    with sqlite3.connect(store) as conn:
        conn.execute(sql, params)


@pytest.mark.parametrize(
    ("how", "finding"),
    [
        ("edit", "entry 1 does not match its hash (edited)"),
        ("delete", "entries 2..2 are missing (deleted)"),
        ("reorder", "(reordered"),
    ],
)
async def test_a_tampered_trail_is_caught_and_named(trail: tuple[Path, Path], how: str, finding: str) -> None:
    config, store = trail
    with sqlite3.connect(store) as conn:
        rows = conn.execute("SELECT id, entry FROM audit ORDER BY id").fetchall()
    if how == "edit":
        edited = json.loads(rows[0][1]) | {"outcome": "refused"}
        tamper(store, "UPDATE audit SET entry = ? WHERE id = ?", json.dumps(edited), rows[0][0])
    elif how == "delete":
        tamper(store, "DELETE FROM audit WHERE id = ?", rows[1][0])
    else:
        tamper(store, "UPDATE audit SET entry = ? WHERE id = ?", rows[2][1], rows[1][0])
        tamper(store, "UPDATE audit SET entry = ? WHERE id = ?", rows[1][1], rows[2][0])
    verified = cli(config, "verify")
    assert verified.returncode == 1
    assert finding in verified.stdout, verified.stdout


async def test_an_outcome_the_store_cannot_record_is_answered_logged_and_stored_by_the_retry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, era: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The outcome's entry is stored with the key's settlement, in one step. If the store is gone by then, the
    caller still hears what happened (applied: the write did happen), and the entry is logged at error level.
    The outcome is kept and stored by the next call, so the retry replays the write, the audit holds both
    decisions in order, and the backend wrote once."""
    db = tmp_path / "backend.db"
    config = parse_config(config_data(TENANTS, db, *TENANTS.seed_demo, state_dir=tmp_path))
    async with running_gateway(config) as gw, connect(gw, era, Answers()) as client:
        args = {"planId": (await preview(client, TENANTS))["planId"], "idempotencyKey": new_key()}
        version = TENANTS.version(db, TENANTS.main)

        async def unreachable(record: Any, entry: Any = None) -> None:
            raise StoreUnavailable("the store went away")

        with monkeypatch.context() as patch, caplog.at_level(logging.ERROR):
            patch.setattr(gw.store, "settle", unreachable)
            first = await client.call_tool("reset_tenant", args)
        logged = [record.getMessage() for record in caplog.records if record.name == "gateway.audit.trail"]
        retry = await client.call_tool("reset_tenant", args)
        outcomes = [entry.outcome async for entry in gw.store.audit_entries()]
    assert first.structured_content is not None
    assert (first.structured_content["replayed"], first.structured_content["version"]) == (False, version + 1)
    assert retry.structured_content == {**first.structured_content, "replayed": True}
    assert outcomes == ["applied", "replayed"]
    assert TENANTS.write_count(db) == 1
    assert len(logged) == 1 and args["idempotencyKey"] in logged[0] and "outcome='applied'" in logged[0]


HOSTILE_KEY = (
    "k-000001\r\x1b[2K1  2026-12-02T18:00:00Z  local  reset_tenant  tn_checkout01  refused:not_confirmed\u202e"
)


async def test_a_hostile_key_cannot_repaint_the_audit_list(tmp_path: Path, era: str) -> None:
    """A refused call's raw idempotencyKey with a carriage return, an ANSI erase and a bidi override: the trail
    keeps no unvalidated value (the key is flagged, escaped), and the listed table prints every character as
    itself or as a visible escape, so the applied write above it still reads as applied."""
    store = tmp_path / "gateway.db"
    data = config_data(
        TENANTS, tmp_path / "backend.db", *TENANTS.seed_demo, store=f"sqlite:{store}", state_dir=tmp_path
    )
    async with running_gateway(parse_config(data)) as gw, connect(gw, era, Answers()) as client:
        applied = {"planId": (await preview(client, TENANTS))["planId"], "idempotencyKey": new_key()}
        await client.call_tool("reset_tenant", applied)
        await client.call_tool("reset_tenant", {"planId": applied["planId"], "idempotencyKey": HOSTILE_KEY})
    config = write_toml(data, tmp_path / "gateway.toml")
    listed = cli(config, "list")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    hidden = [char for char in listed.stdout if char != "\n" and unicodedata.category(char) in HIDDEN]
    assert hidden == []
    assert len(lines) == 3
    assert (lines[1].split()[5], lines[1].split()[8]) == ("applied", applied["idempotencyKey"])
    assert "refused:invalid_arguments" in lines[2].split()  # no target: the call never reached a plan
    entries = [json.loads(line) for line in cli(config, "list", "--json").stdout.splitlines()]
    assert entries[1]["idempotency_key"] is None
    assert entries[1]["extra"] == {"invalid": {"idempotencyKey": printable(HOSTILE_KEY)}}
    assert cli(config, "verify").returncode == 0


async def test_a_write_people_approved_lists_its_events_by_plan_and_verifies_them_together(tmp_path: Path) -> None:
    """``audit list --plan`` shows proposed, the approval, the backend call and what was returned, in order and
    sharing one facts digest; ``audit verify`` checks them together with the chain."""
    data = page_data(tmp_path)
    async with running_gateway(parse_config(data)) as gw:
        _, args = await approved_pending_write(gw)
        async with connect(gw, "2026-07-28", Answers()) as client:
            assert not (await client.call_tool("reset_tenant", args)).is_error
    config = write_toml(data, tmp_path / "gateway.toml")
    listed = cli(config, "list", "--plan", args["planId"], "--json")
    assert listed.returncode == 0, listed.stderr
    entries = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [entry["outcome"] for entry in entries] == ["proposed", "refused", "approval", "applied", "returned"]
    assert len({entry["extra"]["factsDigest"] for entry in entries}) == 1
    verified = cli(config, "verify")
    assert verified.returncode == 0, verified.stdout
    assert verified.stdout.startswith("ok    ")
