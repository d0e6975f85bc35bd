"""The audit as evidence: a chain keyed with a secret kept outside the store, rotatable; a head an operator exports
and verifies against later; a trim that keeps the rest verifiable; chains sealed before keying still readable."""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from gateway.config import parse_config
from tests.support.clients import Answers, connect, error_code, new_key, preview, running_gateway
from tests.support.configs import config_data, write_toml
from tests.support.profiles import TENANTS
from tests.system.test_audit import cli, trail, write_trail

pytestmark = pytest.mark.anyio
__all__ = ["trail"]  # the fixture, shared with test_audit

FLOOD = 150
OLD_KEY = "old-audit-key-0123456789abcdef0123456789"
NEW_KEY = "new-audit-key-0123456789abcdef0123456789"


def rows(store: Path) -> list[tuple[int, dict[str, Any]]]:
    with sqlite3.connect(store) as conn:
        return [(id_, json.loads(body)) for id_, body in conn.execute("SELECT id, entry FROM audit ORDER BY id")]


def rewrite(store: Path, entries: list[tuple[int, dict[str, Any]]]) -> None:
    with sqlite3.connect(store) as conn:
        for id_, entry in entries:
            conn.execute("UPDATE audit SET entry = ? WHERE id = ?", (json.dumps(entry), id_))


def sha256_sealed(entries: list[tuple[int, dict[str, Any]]]) -> list[tuple[int, dict[str, Any]]]:
    """What someone with write access to the store can compute: the chain re-sealed with plain SHA-256 (the
    unkeyed format), entry by entry, as if nothing had been edited."""
    resealed, prev = [], ""
    for id_, entry in entries:
        fields = {k: v for k, v in entry.items() if k not in ("seq", "prev_hash", "hash", "key_id")}
        body = json.dumps({"entry": fields, "prev": prev}, sort_keys=True, separators=(",", ":"), default=str)
        digest = hashlib.sha256(body.encode()).hexdigest()
        resealed.append((id_, {**fields, "seq": entry["seq"], "prev_hash": prev, "hash": digest}))
        prev = digest
    return resealed


async def test_an_entry_edited_and_the_chain_resealed_without_the_key_is_caught(trail: tuple[Path, Path]) -> None:
    config, store = trail
    entries = rows(store)
    entries[0][1]["outcome"] = "refused"  # an applied reset repainted as refused
    rewrite(store, sha256_sealed(entries))
    verified = cli(config, "verify")
    assert verified.returncode == 1, verified.stdout


async def test_an_exported_head_catches_a_truncated_trail(trail: tuple[Path, Path]) -> None:
    config, store = trail
    head = cli(config, "head").stdout.strip()
    assert head.startswith("3:")
    assert cli(config, "verify", "--head", head).returncode == 0
    with sqlite3.connect(store) as conn:
        conn.execute("DELETE FROM audit WHERE id = (SELECT MAX(id) FROM audit)")  # the refusal disappears
    assert cli(config, "verify").returncode == 0  # a shorter chain is still a chain...
    assert cli(config, "verify", "--head", head).returncode == 1  # ...but not the one the operator exported


async def test_entries_sealed_before_a_key_rotation_still_verify_after_it(tmp_path: Path) -> None:
    config, _ = await write_trail(tmp_path, audit_key=OLD_KEY)
    await write_trail(tmp_path, audit_key=f"{NEW_KEY},{OLD_KEY}")
    ring = {**os.environ, "GATEWAY_AUDIT_KEY": f"{NEW_KEY},{OLD_KEY}"}
    listed = [json.loads(line) for line in cli(config, "list", "--json", env=ring).stdout.splitlines()]
    assert len({entry["key_id"] for entry in listed}) == 2  # each entry names the key that sealed it
    assert cli(config, "verify", env=ring).returncode == 0
    assert cli(config, "verify", env={**os.environ, "GATEWAY_AUDIT_KEY": NEW_KEY}).returncode == 1


async def test_a_chain_sealed_before_keying_verifies_as_far_as_the_operator_accepts_unkeyed_entries(
    tmp_path: Path,
) -> None:
    config, store = await write_trail(tmp_path)
    rewrite(store, sha256_sealed(rows(store)))  # as a gateway before the keyed chain stored them
    await write_trail(tmp_path)  # the upgraded gateway goes on with keyed entries after them
    refused = cli(config, "verify")
    assert refused.returncode == 1  # unkeyed entries count as evidence only as far as the operator says
    verified = cli(config, "verify", "--unkeyed-through", "3")
    assert verified.returncode == 0, verified.stdout
    assert verified.stdout.startswith("note  entries 1..3 were sealed before the chain was keyed")
    rewrite(store, sha256_sealed(rows(store)))  # every entry re-sealed without the key, keyed ones included
    assert cli(config, "verify", "--unkeyed-through", "3").returncode == 1


async def test_trim_deletes_old_entries_and_the_rest_still_verifies(trail: tuple[Path, Path]) -> None:
    config, store = trail
    entries = rows(store)
    between = (entries[1][1]["at"] + entries[2][1]["at"]) / 2
    trimmed = cli(config, "trim", "--before", _iso(between))
    assert trimmed.returncode == 0, trimmed.stderr
    kept = [entry for _, entry in rows(store)]
    assert [(entry["seq"], entry["outcome"]) for entry in kept] == [(3, kept[0]["outcome"]), (4, "trimmed")]
    assert kept[1]["extra"]["trimmed_through"] == 2
    assert cli(config, "verify").returncode == 0
    with sqlite3.connect(store) as conn:
        conn.execute("DELETE FROM audit WHERE id = (SELECT MIN(id) FROM audit)")  # past the checkpoint
    assert cli(config, "verify").returncode == 1


def _iso(at: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(at, UTC).isoformat().replace("+00:00", "Z")


async def test_a_flood_of_refusals_is_counted_and_audited_per_minute_not_row_by_row(tmp_path: Path, era: str) -> None:
    store = tmp_path / "gateway.db"
    data = config_data(
        TENANTS, tmp_path / "backend.db", *TENANTS.seed_demo, store=f"sqlite:{store}", state_dir=tmp_path
    )
    async with running_gateway(parse_config(data)) as gw, connect(gw, era, Answers()) as client:
        applied = {"planId": (await preview(client, TENANTS))["planId"], "idempotencyKey": new_key()}
        for _ in range(FLOOD):
            missing = {"planId": "pl_" + secrets.token_urlsafe(16), "idempotencyKey": new_key()}
            assert error_code(await client.call_tool("reset_tenant", missing)) == "plan_not_found"
        assert not (await client.call_tool("reset_tenant", applied)).is_error
        counted = gw.metrics.refusals_before_plan.labels("reset_tenant", "plan_not_found")
        assert counted._value.get() == FLOOD
    config = write_toml(data, tmp_path / "gateway.toml")
    entries = [json.loads(line) for line in cli(config, "list", "--json").stdout.splitlines()]
    refused = [entry for entry in entries if entry["code"] == "plan_not_found"]
    assert len(refused) <= 4  # the first of each minute, and one entry with the repeats (a minute may turn once)
    firsts = [entry for entry in refused if "repeats" not in entry["extra"]]
    reports = [entry for entry in refused if "repeats" in entry["extra"]]
    assert len(firsts) + sum(entry["extra"]["repeats"] for entry in reports) == FLOOD
    assert [entry["outcome"] for entry in entries if entry["code"] is None] == ["applied"]
    assert cli(config, "verify").returncode == 0
