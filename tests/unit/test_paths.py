"""Where a config's paths point: beside the config file whatever the working directory, the built-in config's
state in the platform state directory, and ``init`` writing a config to edit."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from gateway.cli.main import main
from gateway.config import DEFAULT_CONFIG, load_config
from gateway.config.paths import where_state_lives


def a_config(folder: Path, backend: str, gateway: str = "") -> Path:
    """The built-in config with its [gateway] and [backend] sections replaced."""
    text = DEFAULT_CONFIG.read_text()
    head, _, tail = text.partition("[backend]")
    _, _, rest = tail.partition("[lookups.fixtures]")
    before, _, after = head.partition("[gateway]")
    _, _, after = after.partition("[auth]")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "gateway.toml"
    path.write_text(f"{before}[gateway]\n{gateway}\n[auth]{after}[backend]\n{backend}\n[lookups.fixtures]{rest}")
    return path


def test_relative_paths_in_a_config_are_taken_from_its_folder_not_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "conf"
    config_file = a_config(
        folder,
        'command = "bin/backend"\nargs = ["--db", "var/legacy.db", "--name", "x"]',
        'store = "sqlite:data/gateway.db"\nstate_dir = "state"',
    )
    monkeypatch.chdir("/")
    config = load_config(config_file)
    assert config.backend is not None
    assert config.gateway.store == f"sqlite:{folder}/data/gateway.db"
    assert config.gateway.state_dir == str(folder / "state")
    assert config.backend.command == str(folder / "bin" / "backend")
    # A backend's own arguments are never guessed at: the child starts in the config's folder instead.
    assert config.backend.args == ["--db", "var/legacy.db", "--name", "x"]
    assert config.backend.cwd == str(folder)


def test_state_dir_defaults_to_var_beside_the_config_and_fills_the_backend_placeholders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config_file = a_config(
        tmp_path,
        'command = "{python}"\nargs = ["-m", "x", "--db", "{state_dir}/b.db", "{other}"]\nenv = {DB = "{state_dir}"}',
    )
    monkeypatch.chdir("/")
    config = load_config(config_file)
    assert config.backend is not None
    state = tmp_path / "var"
    assert config.gateway.state_dir == str(state)
    assert config.gateway.store == f"sqlite:{state}/gateway.db"
    assert config.backend.command == sys.executable
    assert config.backend.args == ["-m", "x", "--db", f"{state}/b.db", "{other}"]
    assert config.backend.env == {"DB": str(state)}


def test_each_named_backend_has_its_placeholders_filled_and_starts_in_the_configs_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config_file = a_config(tmp_path, 'command = "{python}"\nargs = ["-m", "x", "--db", "{state_dir}/b.db"]')
    config_file.write_text(config_file.read_text().replace("[backend]", "[backends.demo]"))
    monkeypatch.chdir("/")
    config = load_config(config_file)
    backend = config.backend_sections()["demo"]
    assert config.backend is None
    assert backend.command == sys.executable
    assert backend.args == ["-m", "x", "--db", f"{tmp_path / 'var'}/b.db"]
    assert backend.cwd == str(tmp_path)


def test_a_public_key_file_is_taken_from_the_configs_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = a_config(tmp_path, 'command = "legacy-backend"').read_text()
    text = text.replace(
        'verifier = "none"',
        'verifier = "jwt"\nresource_url = "https://gw.test/mcp"\n'
        'jwt = { issuer = "https://idp.test", public_key_file = "keys/idp.pem" }',
    )
    (tmp_path / "gateway.toml").write_text(text)
    monkeypatch.chdir("/")
    config = load_config(tmp_path / "gateway.toml")
    assert config.auth.jwt is not None and config.auth.jwt.public_key_file == str(tmp_path / "keys" / "idp.pem")


def test_the_built_in_config_keeps_its_state_in_the_platform_state_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    monkeypatch.chdir("/")
    config = load_config()
    assert config.backend is not None
    state = tmp_path / "mcp-safety-gateway"
    assert config.gateway.state_dir == str(state)
    assert config.gateway.store == f"sqlite:{state}/gateway.db"
    assert config.backend.args[config.backend.args.index("--db") + 1] == f"{state}/legacy.db"
    assert config.backend.cwd == str(state)


def test_the_start_up_line_names_where_state_lives_without_a_stores_password(tmp_path: Path) -> None:
    config = load_config(a_config(tmp_path, 'command = "legacy-backend"', 'store = "redis://:s3cret@cache:6379/0"'))
    line = where_state_lives(config.gateway, secret_from_env=False)
    assert "s3cret" not in line
    assert "redis://cache:6379/0" in line and str(tmp_path / "var" / "secret.key") in line


def test_init_writes_a_config_whose_state_lives_beside_it_and_never_overwrites_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "new"
    assert main(["init", str(folder)]) == 0
    written = folder / "gateway.toml"
    assert written.read_text() == DEFAULT_CONFIG.read_text()
    config = load_config(written)
    assert config.gateway.store == f"sqlite:{folder}/var/gateway.db"
    written.write_text("# edited\n")
    capsys.readouterr()
    assert main(["init", str(folder)]) == 2
    assert written.read_text() == "# edited\n"
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    assert main(["init", str(folder), "--force"]) == 0
    assert written.read_text() == DEFAULT_CONFIG.read_text()
