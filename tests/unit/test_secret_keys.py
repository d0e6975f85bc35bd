"""A key ring from the environment that is too short is refused in one sentence, before anything runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.cli.main import main
from gateway.config import to_toml
from tests.support.configs import config_data
from tests.support.profiles import TENANTS


@pytest.mark.parametrize("env_var", ["GATEWAY_AUDIT_KEY", "GATEWAY_SECRET_KEY"])
@pytest.mark.parametrize("command", [["audit", "list"], ["audit", "verify"], ["check"], ["serve"]])
def test_a_short_key_is_refused_in_one_sentence_naming_its_variable(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    env_var: str,
    command: list[str],
) -> None:
    config = tmp_path / "gateway.toml"
    store = f"sqlite:{tmp_path}/gateway.db"
    config.write_text(to_toml(config_data(TENANTS, tmp_path / "backend.db", store=store, state_dir=tmp_path)))
    monkeypatch.setenv(env_var, f"{'k' * 40},short")
    assert main([*command, "--config", str(config)]) == 2
    printed = capsys.readouterr()
    assert printed.err.strip().splitlines() == [
        f"mcp-safety-gateway: {env_var}: every key must be at least 32 characters of secret randomness"
    ]
    assert not (tmp_path / "gateway.db").exists(), "nothing was opened"
