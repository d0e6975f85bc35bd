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
from tests.support.approvals import approvals_section
from tests.support.configs import config_data, together_data, write_toml
from tests.support.profiles import DATABASES, FLAGS, TENANTS, Profile


def run_check(
    profile: Profile, tmp: Path, change: Callable[[dict[str, Any]], None] | None = None, *flags: str
) -> tuple[int, str]:
    tmp.mkdir(parents=True, exist_ok=True)
    data = config_data(profile, tmp / "backend.db", *profile.seed_demo, state_dir=tmp / "state")
    if change is not None:
        change(data)
    config = write_toml(data, tmp / "gateway.toml")
    done = subprocess.run(
        [sys.executable, "-m", "gateway", "check", "--config", str(config), *flags],
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
    # Then each tool's risk (SEP-2793's fields, as its _meta carries them).
    risk_line = next(line.split() for line in output.splitlines() if line.startswith(f"risk  {profile.write_tool}"))
    assert risk_line[2:] == ["high", "destroy", "item", "none", "single", "-"]
    assert "blast radius" in output


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


def test_a_wrong_id_field_is_named(profile: Profile, tmp_path: Path) -> None:
    def rename(data: dict[str, Any]) -> None:
        data["tools"][profile.preview_tool]["target"]["id_field"] = "identifier"

    code, output = run_check(profile, tmp_path, rename)
    assert code == 1
    assert f"tools.{profile.preview_tool}.target.id_field" in output


def misname_the_write(profile: Profile) -> Callable[[dict[str, Any]], None]:
    def misname(data: dict[str, Any]) -> None:
        data["tools"][profile.write_tool]["call"]["action"] += "x"

    return misname


def test_a_write_action_the_god_tools_schema_enumerates_is_verified_and_a_typo_is_named(tmp_path: Path) -> None:
    code, output = run_check(DATABASES, tmp_path / "good")
    assert code == 0, output
    assert f"ok    tools.{DATABASES.write_tool} would call 'restore', listed in the enum of manage_db.command" in output
    code, output = run_check(DATABASES, tmp_path / "typo", misname_the_write(DATABASES))
    assert code == 1
    assert f"FAIL  tools.{DATABASES.write_tool}.call.action: 'restorex' is not one of the god-tool's actions" in output


def no_probe(data: dict[str, Any]) -> None:
    """The backend table without ``probe_actions`` (which the built-in demo config sets)."""
    data["backend"].pop("probe_actions")


def test_an_unlisted_write_action_is_a_warning_until_a_probe_is_asked_for_and_then_a_typo_fails(tmp_path: Path) -> None:
    code, output = run_check(TENANTS, tmp_path / "plain", no_probe)
    assert code == 0, output
    assert f"WARN  tools.{TENANTS.write_tool}.call.action: 'reseed' is unverified" in output
    code, output = run_check(TENANTS, tmp_path / "probed", no_probe, "--probe-actions")
    assert code == 0, output
    assert "would call 'reseed', listed in its refusal of an action that cannot exist" in output
    assert "WARN" not in output
    code, output = run_check(TENANTS, tmp_path / "demo")  # the demo config's own probe_actions = true
    assert code == 0, output
    assert "would call 'reseed', listed in its refusal" in output
    assert "WARN" not in output
    code, output = run_check(TENANTS, tmp_path / "typo", misname_the_write(TENANTS), "--probe-actions")
    assert code == 1, output  # the refusal states every valid action, and this one is not among them
    assert f"FAIL  tools.{TENANTS.write_tool}.call.action: 'reseedx' is not one of the god-tool's actions" in output
    assert "'reseed'" in output and "as its refusal of an action that cannot exist says" in output


def test_a_probe_whose_refusal_lists_nothing_leaves_the_write_action_unverified(tmp_path: Path) -> None:
    code, output = run_check(FLAGS, tmp_path, None, "--probe-actions")
    assert code == 0, output
    assert f"WARN  tools.{FLAGS.write_tool}.call.action: 'flags.set_rollout' is unverified" in output


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            lambda d, p: d["tools"][p.write_tool].update(confirm="maybe"),
            "confirm: Input should be 'form', 'typed' or 'url'",
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


def run_check_together(tmp: Path, change: Callable[[dict[str, Any]], None] | None = None) -> tuple[int, str]:
    tmp.mkdir(parents=True, exist_ok=True)
    data = together_data(TENANTS, tmp / "backend.db", *TENANTS.seed_demo, state_dir=tmp / "state")
    if change is not None:
        change(data)
    config = write_toml(data, tmp / "gateway.toml")
    done = subprocess.run(
        [sys.executable, "-m", "gateway", "check", "--config", str(config)], capture_output=True, text=True, timeout=180
    )
    return done.returncode, done.stdout + done.stderr


def test_a_two_backend_config_passes_and_names_each_tools_backend(tmp_path: Path) -> None:
    code, output = run_check_together(tmp_path)
    assert code == 0, output
    assert "ok    backends.tenants publishes manage_tenant" in output
    assert "ok    backends.flags publishes manage_flags" in output
    rows = {line.split()[0]: line.split() for line in output.splitlines() if line.split()}
    assert rows[TENANTS.write_tool][-1] == "tenants" and rows[FLAGS.write_tool][-1] == "flags"
    assert rows["describe_flag"][1:6] == ["passthrough", "false", "false", "true", "false"]
    assert rows["describe_flag"][-3:] == ["tool", "set_flag_description", "flags"]


def test_a_passthrough_tool_its_backend_lacks_is_named(tmp_path: Path) -> None:
    code, output = run_check_together(tmp_path, lambda data: data["tools"]["describe_flag"].update(source="nope"))
    assert code == 1
    assert "FAIL  tools.describe_flag.source: the backend has no tool 'nope'" in output


def approvals_at(public_url: str, **approvals: Any) -> Callable[[dict[str, Any]], None]:
    def change(data: dict[str, Any]) -> None:
        data["tools"][TENANTS.write_tool]["confirm"] = "url"
        data["approvals"] = {**approvals_section(public_url), **approvals}

    return change


@pytest.mark.parametrize(
    ("public_url", "flags", "approvals", "warned"),
    [
        ("http://127.0.0.1:8080", ["--port", "9090"], {}, True),  # init's public_url, served elsewhere
        ("http://127.0.0.1:8080", [], {}, False),  # serve's default port
        ("http://localhost:9090", ["--port", "9090"], {}, False),
        ("http://127.0.0.1:8080", [], {"page_listen": "127.0.0.1:8181"}, True),  # the stdio page's own port
        ("https://gw.example.com", ["--port", "9090"], {}, False),  # not this machine: a proxy may map it
    ],
)
def test_check_warns_when_approval_links_point_at_another_local_port(
    tmp_path: Path, public_url: str, flags: list[str], approvals: dict[str, Any], warned: bool
) -> None:
    code, output = run_check(TENANTS, tmp_path, approvals_at(public_url, **approvals), *flags)
    assert code == 0, output
    warnings = [line for line in output.splitlines() if line.startswith("WARN  approvals.public_url")]
    assert bool(warnings) is warned, output
