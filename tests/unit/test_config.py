"""Configuration: the default file loads, and a bad file fails with a sentence naming the key."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.config import ConfigError, WriteTool, load_config, parse_config


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
    ],
)
def test_a_bad_config_names_the_key(change: Any, key: str) -> None:
    data = default_data()
    change(data)
    with pytest.raises(ConfigError) as raised:
        parse_config(data)
    assert key in str(raised.value)


def test_a_missing_file_is_a_plain_sentence(tmp_path: Any) -> None:
    with pytest.raises(ConfigError) as raised:
        load_config(tmp_path / "absent.toml")
    assert "cannot read config file" in str(raised.value)
