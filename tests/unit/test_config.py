"""Configuration: the default file loads, and a bad file fails with a sentence naming the key."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gateway.cli.main import lease_refusal
from gateway.config import ConfigError, WriteTool, load_config, parse_config
from tests.support.configs import together_data
from tests.support.profiles import TENANTS


def default_data() -> dict[str, Any]:
    return load_config().model_dump()


def test_the_default_config_publishes_three_tools_split_by_risk() -> None:
    config = load_config()
    assert {name: tool.kind for name, tool in config.tools.items()} == {
        "list_tenants": "read",
        "preview_tenant_reset": "preview",
        "reset_tenant": "write",
    }
    reset = config.tools["reset_tenant"]
    assert isinstance(reset, WriteTool) and reset.preview == "preview_tenant_reset"
    assert config.gateway.store == f"sqlite:{config.gateway.state_dir}/gateway.db"


@pytest.mark.parametrize(
    ("change", "key"),
    [
        (lambda d: d["tools"]["reset_tenant"].update(confirm="maybe"), "tools.reset_tenant.confirm"),
        (lambda d: d["tools"]["list_tenants"].update(max_limit=500), "tools.list_tenants.max_limit"),
        (lambda d: d["tools"]["list_tenants"].update(colour="red"), "tools.list_tenants.colour"),
        (lambda d: d["backend"].update(command=None), "backend"),
        (lambda d: d["tools"]["reset_tenant"].update(preview="list_tenants"), "preview"),
        (lambda d: d.pop("backend"), "backend"),
        (lambda d: d["tools"]["preview_tenant_reset"]["target"].update(noun="plan"), "target.noun"),
        (lambda d: d["tools"]["preview_tenant_reset"]["target"].update(noun="Big Tenant"), "target.noun"),
    ],
)
def test_a_bad_config_names_the_key(change: Any, key: str) -> None:
    data = default_data()
    change(data)
    with pytest.raises(ConfigError) as raised:
        parse_config(data)
    assert key in str(raised.value)


PASSTHROUGH = {
    "kind": "passthrough",
    "description": "Status.",
    "annotations": {"read_only": True, "destructive": False, "idempotent": True, "open_world": False},
}


@pytest.mark.parametrize(
    ("change", "key"),
    [
        (lambda t: t["annotations"].pop("open_world"), "tools.status.annotations.open_world"),
        (lambda t: t["annotations"].update(destructive=True), "tools.status.annotations"),
        (lambda t: t.update(confirm="typed"), "tools.status"),
        (lambda t: t.update(backend="nowhere"), "tools.status.backend"),
    ],
    ids=["a-hint-left-to-the-spec-default", "read-only-and-destructive", "typed-without-target", "unknown-backend"],
)
def test_a_passthrough_tool_must_state_every_hint_and_fit_the_config(change: Any, key: str) -> None:
    data = default_data()
    tool = {**PASSTHROUGH, "annotations": dict(PASSTHROUGH["annotations"])}  # type: ignore[arg-type]
    change(tool)
    data["tools"]["status"] = tool
    with pytest.raises(ConfigError) as raised:
        parse_config(data)
    assert key in str(raised.value)


def two_backends() -> dict[str, Any]:
    data = default_data()
    single = data.pop("backend")
    data["backends"] = {"tenants": single, "flags": {**single, "tool": "manage_flags"}}
    for entry in (*data["tools"].values(), *data["lookups"].values()):
        entry["backend"] = "tenants"
    data["tools"]["reset_tenant"]["backend"] = None
    return data


def test_two_backends_each_tool_naming_its_own_load() -> None:
    config = parse_config(two_backends())
    assert list(config.backend_sections()) == ["tenants", "flags"]
    assert config.backend_of("reset_tenant") == "tenants"  # a write tool is served by its preview's backend
    assert config.lookup_backend("fixtures") == "tenants"


@pytest.mark.parametrize(
    ("change", "key"),
    [
        (lambda d: d["tools"]["list_tenants"].update(backend=None), "tools.list_tenants.backend"),
        (lambda d: d["lookups"]["fixtures"].update(backend=None), "lookups.fixtures.backend"),
        (lambda d: d["tools"]["reset_tenant"].update(backend="flags"), "tools.reset_tenant.backend"),
        (
            lambda d: d.update(backend=d["backends"]["flags"], backends={"default": d["backends"]["tenants"]}),
            "backends.default",
        ),
        (lambda d: d["backends"].update({"a b": d["backends"]["flags"]}), "backends.a b"),
    ],
    ids=["tool-without-backend", "lookup-without-backend", "write-on-another-backend", "default-twice", "bad-name"],
)
def test_with_several_backends_a_bad_reference_names_the_key(change: Any, key: str) -> None:
    data = two_backends()
    change(data)
    with pytest.raises(ConfigError) as raised:
        parse_config(data)
    assert key in str(raised.value)


def test_a_missing_file_is_a_plain_sentence(tmp_path: Any) -> None:
    with pytest.raises(ConfigError) as raised:
        load_config(tmp_path / "absent.toml")
    assert "cannot read config file" in str(raised.value)


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (lambda d: d["backends"]["flags"].update(call_timeout_seconds=28), "backends.flags.call_timeout_seconds"),
        (lambda d: d["tools"]["describe_flag"].update(timeout_seconds=40), "tools.describe_flag.timeout_seconds"),
    ],
)
def test_a_redis_lock_lease_must_outlast_every_backends_and_every_pass_through_writes_timeout(
    tmp_path: Path, change: Callable[[dict[str, Any]], None], named: str
) -> None:
    store = "redis://127.0.0.1:1/0?lock_lease=30"
    data = together_data(TENANTS, tmp_path / "backend.db", state_dir=tmp_path / "state", store=store)
    assert lease_refusal(parse_config(data)) is None  # every timeout is 20 s: the lease outlasts each by 10 s
    change(data)
    refusal = lease_refusal(parse_config(data))
    assert refusal is not None and named in refusal


def test_the_old_name_of_the_form_mode_loads_as_form_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    data = default_data()
    data["tools"]["reset_tenant"]["confirm"] = "boolean"
    with caplog.at_level("WARNING", logger="gateway.config"):
        config = parse_config(data)
    tool = config.tools["reset_tenant"]
    assert isinstance(tool, WriteTool) and tool.confirm == "form" and tool.modes() == {"form"}
    assert [record.getMessage() for record in caplog.records] == [
        "tools.reset_tenant.confirm: 'boolean' is the old name of 'form'; it still loads, write 'form'"
    ]
    assert data["tools"]["reset_tenant"]["confirm"] == "boolean"  # the caller's data is left as it was


def test_a_plan_previewed_with_the_old_mode_name_reads_as_form() -> None:
    from gateway.approvals.policy import from_plan

    tool = load_config().tools["reset_tenant"]
    assert isinstance(tool, WriteTool)
    assert from_plan({"mode": "boolean", "rule": None}, tool).mode == "form"


def test_two_tables_of_one_name_are_a_sentence_naming_both_not_a_raw_toml_error(tmp_path: Path) -> None:
    file = tmp_path / "gateway.toml"
    entry = 'kind = "passthrough"\nannotations = { read_only = true, destructive = false, idempotent = true, '
    entry += "open_world = false }\n"
    file.write_text(f'[backend]\ncommand = "x"\n\n[tools.search]\nbackend = "a"\n{entry}\n[tools.search]\n{entry}')
    with pytest.raises(ConfigError) as raised:
        load_config(file)
    assert "[tools.search] is declared twice (lines 4 and 9)" in str(raised.value)
    assert 'source = "..."' in str(raised.value)
