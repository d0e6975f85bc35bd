"""`mcp-safety-gateway check` against a real backend: a good config passes, a wrong one is named."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from gateway.records import KeyRecord, Plan
from gateway.stores import open_store
from tests.support.configs import config_data, write_toml
from tests.support.profiles import TENANTS, Profile


def run_check(profile: Profile, tmp: Path, change: Callable[[dict[str, Any]], None] | None = None) -> tuple[int, str]:
    data = config_data(profile, tmp / "backend.db", *profile.seed_demo, state_dir=tmp / "state")
    if change is not None:
        change(data)
    config = write_toml(data, tmp / "gateway.toml")
    done = subprocess.run(
        [sys.executable, "-m", "gateway", "check", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.returncode, done.stdout + done.stderr


def test_a_matching_config_passes_and_prints_the_tool_table(profile: Profile, tmp_path: Path) -> None:
    code, output = run_check(profile, tmp_path)
    assert code == 0, output
    assert "FAIL" not in output
    for tool in (profile.list_tool, profile.preview_tool, profile.write_tool):
        assert tool in output
    write_line = next(line for line in output.splitlines() if line.startswith(profile.write_tool))
    assert write_line.split()[1:6] == ["write", "false", "true", "true", "false"]


def test_a_misnamed_list_action_is_named(profile: Profile, tmp_path: Path) -> None:
    def misname(data: dict[str, Any]) -> None:
        data["tools"][profile.list_tool]["call"]["action"] += "x"

    code, output = run_check(profile, tmp_path, misname)
    assert code == 1
    assert f"FAIL  tools.{profile.list_tool}.call:" in output


def test_a_misnamed_target_read_is_named(profile: Profile, tmp_path: Path) -> None:
    def misname(data: dict[str, Any]) -> None:
        data["tools"][profile.preview_tool]["target"]["get"]["action"] += "x"

    code, output = run_check(profile, tmp_path, misname)
    assert code == 1
    assert f"FAIL  tools.{profile.preview_tool}.target.get.action:" in output


def test_a_field_the_backend_does_not_have_is_named(profile: Profile, tmp_path: Path) -> None:
    def rename(data: dict[str, Any]) -> None:
        fields = data["tools"][profile.list_tool]["fields"]
        first = next(iter(fields))
        fields[first]["from"] = "no_such_field"

    code, output = run_check(profile, tmp_path, rename)
    assert code == 1
    assert "the backend's items have no 'no_such_field'" in output


def test_a_wrong_version_field_is_named(profile: Profile, tmp_path: Path) -> None:
    def rename(data: dict[str, Any]) -> None:
        data["tools"][profile.preview_tool]["target"]["version_field"] = "revision"

    code, output = run_check(profile, tmp_path, rename)
    assert code == 1
    assert f"tools.{profile.preview_tool}.target" in output


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            lambda d, p: d["tools"][p.write_tool].update(confirm="maybe"),
            "confirm: Input should be 'boolean', 'typed' or 'url'",
        ),
        (lambda d, p: d["tools"][p.write_tool]["call"]["payload"].update(extra="{nope}"), "uses {nope}; available:"),
        (lambda d, p: d["tools"][p.list_tool].update(colour="red"), "colour: unknown key"),
    ],
    ids=["bad-enum", "unknown-template-name", "unknown-key"],
)
def test_an_invalid_file_is_refused_with_a_sentence(
    profile: Profile, tmp_path: Path, change: Callable[[dict[str, Any], Profile], None], expected: str
) -> None:
    code, output = run_check(profile, tmp_path, lambda data: change(data, profile))
    assert code == 2
    assert expected in output
    assert "Traceback" not in output


@pytest.mark.anyio
async def test_check_and_audit_leave_a_live_gateways_state_alone(tmp_path: Path) -> None:
    """A key in flight may belong to a gateway that is running right now: neither ``check`` nor ``audit`` may
    recover it, and ``check`` does not touch the state directory at all (no store, no key file)."""
    state = tmp_path / "state"
    store_url = f"sqlite:{state}/gateway.db"
    store = open_store(store_url)
    plan = Plan("pl_inflight_inflight_01", "local", TENANTS.write_tool, TENANTS.main, 1, {}, {}, time.time() + 600)
    record = KeyRecord("local", "key-in-flight", plan.plan_id, plan.target, "in_flight", tool=plan.tool)
    await store.put_plan(plan, time.time())
    assert (await store.claim(record, time.time(), 3600)).claimed
    await store.close()
    data = config_data(TENANTS, tmp_path / "backend.db", *TENANTS.seed_demo, store=store_url, state_dir=state)
    config = write_toml(data, tmp_path / "gateway.toml")
    before = snapshot(state)

    done = await anyio.run_process([sys.executable, "-m", "gateway", "check", "--config", str(config)], check=False)
    assert done.returncode == 0, done.stdout.decode() + done.stderr.decode()
    assert snapshot(state) == before

    listed = await anyio.run_process(
        [sys.executable, "-m", "gateway", "audit", "list", "--json", "--config", str(config)]
    )
    assert listed.stdout.decode().strip() == ""  # no "recovered" entry was written
    store = open_store(store_url)
    try:
        assert (await store.get_record("local", "key-in-flight")) == record
    finally:
        await store.close()


def snapshot(directory: Path) -> dict[str, bytes]:
    """Every file under a directory with its bytes."""
    return {str(path.relative_to(directory)): path.read_bytes() for path in directory.rglob("*") if path.is_file()}
