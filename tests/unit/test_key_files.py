"""The key files in a gateway's state directory: one that is empty, too short or not a readable file is refused in a
sentence naming it, never taken as a key. Many processes making the keys at once: tests/system/test_key_files.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.cli.main import main
from gateway.config import to_toml
from gateway.identity.secrets import AUDIT_KEY_FILE, KEY_FILE, load_audit_keys, load_keys
from tests.support.configs import config_data
from tests.support.profiles import TENANTS


@pytest.mark.parametrize("content", ["", "\n", "0123456789abcdef\n"])
@pytest.mark.parametrize("file_name", [KEY_FILE, AUDIT_KEY_FILE])
def test_an_empty_or_short_key_file_is_refused_in_a_sentence_naming_it(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    content: str,
    file_name: str,
) -> None:
    monkeypatch.delenv("GATEWAY_SECRET_KEY", raising=False)
    monkeypatch.delenv("GATEWAY_AUDIT_KEY", raising=False)
    state = tmp_path / "state"
    state.mkdir()
    (state / file_name).write_text(content)
    config = tmp_path / "gateway.toml"
    store = f"sqlite:{tmp_path}/gateway.db"
    config.write_text(to_toml(config_data(TENANTS, tmp_path / "backend.db", store=store, state_dir=state)))
    assert main(["check", "--config", str(config)]) == 2
    said = capsys.readouterr().err.strip().splitlines()
    assert len(said) == 1 and str(state / file_name) in said[0], said
    assert "fewer than 32 characters" in said[0]
    assert not (tmp_path / "gateway.db").exists(), "nothing was opened"
    with pytest.raises(ValueError, match=file_name):
        (load_keys if file_name == KEY_FILE else load_audit_keys)(state)
    assert (state / file_name).read_text() == content, "the file is left for the operator to restore"


def test_a_key_file_that_cannot_be_read_is_refused_in_a_sentence_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("GATEWAY_SECRET_KEY", raising=False)
    monkeypatch.delenv("GATEWAY_AUDIT_KEY", raising=False)
    state = tmp_path / "state"
    (state / KEY_FILE).mkdir(parents=True)  # what a wrongly mounted volume can leave: not a readable file
    config = tmp_path / "gateway.toml"
    store = f"sqlite:{tmp_path}/gateway.db"
    config.write_text(to_toml(config_data(TENANTS, tmp_path / "backend.db", store=store, state_dir=state)))
    assert main(["check", "--config", str(config)]) == 2
    said = capsys.readouterr().err.strip().splitlines()
    assert said == [
        f"mcp-safety-gateway: cannot read the key file {state / KEY_FILE}: Is a directory; the state directory "
        "(gateway.state_dir) must hold it as a file that the gateway's user can read"
    ]
