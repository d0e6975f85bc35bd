"""Every secret can come from an environment variable or from a file its ``_FILE`` twin names (a mounted
Kubernetes Secret, a compose secret), and a secret that cannot be read stops ``check`` and ``serve`` before
anything opens, in one sentence naming the variable (and the config key that names it)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
from psycopg.conninfo import conninfo_to_dict

from gateway.approvals.notify import signed
from gateway.cli.main import main
from gateway.config import ConfigError, Webhook, parse_config, to_toml
from gateway.config.environ import SecretError, secret
from gateway.identity.secrets import load_audit_keys, load_keys
from gateway.signing import SIGNATURE_HEADER
from gateway.stores.postgres.url import parse_url as parse_postgres
from gateway.stores.redis.url import parse_url as parse_redis
from tests.support.configs import config_data
from tests.support.profiles import TENANTS

KEY = "k" * 40
OTHER = "o" * 40
TOKEN = "approver-token-dana-0123456789"
HASH = hashlib.sha256(TOKEN.encode()).hexdigest()


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GATEWAY_SECRET_KEY", "GATEWAY_AUDIT_KEY", "GATEWAY_STORE_PASSWORD", "DANA_SHA256", "HOOK_SECRET"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name + "_FILE", raising=False)


def _file(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / "secrets" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    return str(path)


def test_a_secret_comes_from_its_variable_or_from_the_file_its_twin_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert secret("HOOK_SECRET") is None
    monkeypatch.setenv("HOOK_SECRET", "from-the-variable")
    assert secret("HOOK_SECRET") == "from-the-variable"
    monkeypatch.delenv("HOOK_SECRET")
    monkeypatch.setenv("HOOK_SECRET_FILE", _file(tmp_path, "hook", "from-the-file\n"))
    assert secret("HOOK_SECRET") == "from-the-file", "the file's final line break is not part of the secret"
    monkeypatch.setenv("HOOK_SECRET", "from-the-variable")
    with pytest.raises(SecretError, match="HOOK_SECRET and HOOK_SECRET_FILE are both set"):
        secret("HOOK_SECRET")
    monkeypatch.delenv("HOOK_SECRET")
    monkeypatch.setenv("HOOK_SECRET_FILE", _file(tmp_path, "empty", "\n"))
    with pytest.raises(SecretError, match=f"HOOK_SECRET_FILE: {tmp_path / 'secrets' / 'empty'} is empty"):
        secret("HOOK_SECRET")
    monkeypatch.setenv("HOOK_SECRET_FILE", str(tmp_path / "nowhere"))
    with pytest.raises(SecretError, match=f"HOOK_SECRET_FILE: cannot read {tmp_path / 'nowhere'}"):
        secret("HOOK_SECRET")


def test_the_key_rings_come_from_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GATEWAY_SECRET_KEY_FILE", _file(tmp_path, "secret-key", f"{KEY},{OTHER}\n"))
    monkeypatch.setenv("GATEWAY_AUDIT_KEY_FILE", _file(tmp_path, "audit-key", OTHER))
    state = tmp_path / "state"
    assert load_keys(state) == [KEY.encode(), OTHER.encode()]
    assert load_audit_keys(state) == [OTHER.encode()]
    assert not state.exists(), "no key was generated into the state directory"


def _config(tmp_path: Path, change: Any = None) -> Path:
    data = config_data(TENANTS, tmp_path / "backend.db", store=f"sqlite:{tmp_path}/gateway.db", state_dir=tmp_path)
    if change is not None:
        change(data)
    config = tmp_path / "gateway.toml"
    config.write_text(to_toml(data))
    return config


def _refusal(config: Path, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["check", "--config", str(config)]) == 2
    said = capsys.readouterr().err.strip().splitlines()
    assert len(said) == 1, said
    return said[0]


@pytest.mark.parametrize(
    ("variable", "text", "named"),
    [
        ("GATEWAY_SECRET_KEY", "short", "GATEWAY_SECRET_KEY_FILE: every key must be at least 32 characters"),
        ("GATEWAY_AUDIT_KEY", None, "GATEWAY_AUDIT_KEY_FILE: cannot read"),
        ("GATEWAY_STORE_PASSWORD", None, "gateway.store: GATEWAY_STORE_PASSWORD_FILE: cannot read"),
    ],
)
def test_a_secret_file_that_cannot_be_used_is_refused_before_anything_opens(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    variable: str,
    text: str | None,
    named: str,
) -> None:
    path = _file(tmp_path, "secret", text) if text is not None else str(tmp_path / "missing")
    monkeypatch.setenv(f"{variable}_FILE", path)
    assert named in _refusal(_config(tmp_path), capsys)
    assert not (tmp_path / "gateway.db").exists(), "nothing was opened"


def test_a_variable_the_config_names_is_refused_naming_the_key_when_its_file_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def change(data: dict[str, Any]) -> None:
        data["backend"]["headers_from_env"] = {"Authorization": "HOOK_SECRET"}

    monkeypatch.setenv("HOOK_SECRET", "Bearer x")
    monkeypatch.setenv("HOOK_SECRET_FILE", _file(tmp_path, "hook", "Bearer y"))
    said = _refusal(_config(tmp_path, change), capsys)
    assert said.startswith("mcp-safety-gateway: backend.headers_from_env.Authorization: HOOK_SECRET and"), said
    assert not (tmp_path / "gateway.db").exists(), "nothing was opened"


def test_the_stores_password_comes_from_a_file_and_a_url_of_its_own_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GATEWAY_STORE_PASSWORD_FILE", _file(tmp_path, "store", "p@ss:w/rd\n"))
    assert conninfo_to_dict(parse_postgres("postgresql://gw@db/app").conninfo)["password"] == "p@ss:w/rd"
    redis = parse_redis("redis://redis:6379/0")
    assert redis.url.startswith("redis://:p%40ss%3Aw%2Frd@redis:6379/0?")
    assert parse_redis("redis://default@redis:6379/0").url.startswith("redis://default:p%40ss%3Aw%2Frd@redis:6379/0")
    assert parse_redis("redis://:own@redis:6379/0").url.startswith("redis://:own@redis:6379/0")
    sentinel = parse_redis("redis+sentinel://s1:26379,s2:26379/main")
    assert sentinel.password == "p@ss:w/rd"


def _tokens(name: str) -> Any:
    def change(data: dict[str, Any]) -> None:
        data["approvals"] = {"public_url": "http://127.0.0.1:8080", "tokens": [{name: "DANA_SHA256", "subject": "d"}]}

    return change


def test_a_token_hash_comes_from_the_environment_or_a_file_when_the_config_is_loaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = config_data(TENANTS, tmp_path / "backend.db", state_dir=tmp_path)
    _tokens("sha256_env")(data)
    monkeypatch.setenv("DANA_SHA256_FILE", _file(tmp_path, "dana", HASH.upper() + "\n"))
    assert parse_config(data).approvals.tokens[0].sha256 == HASH
    monkeypatch.delenv("DANA_SHA256_FILE")
    monkeypatch.setenv("DANA_SHA256", HASH)
    data["auth"] = {
        "verifier": "static",
        "resource_url": "http://127.0.0.1:8080/mcp",
        "tokens": [{"sha256_env": "DANA_SHA256", "client_id": "dana-agent"}],
    }
    loaded = parse_config(data)
    assert loaded.auth.tokens[0].sha256 == HASH and loaded.approvals.tokens[0].sha256 == HASH


@pytest.mark.parametrize(
    ("value", "named"),
    [
        (None, "approvals.tokens.0: sha256_env names DANA_SHA256, which is not set (nor DANA_SHA256_FILE)"),
        ("not-a-hash", "approvals.tokens.0: sha256_env: DANA_SHA256 does not hold a SHA-256 in hex"),
    ],
)
def test_a_token_hash_that_is_not_there_is_refused_naming_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str | None, named: str
) -> None:
    data = config_data(TENANTS, tmp_path / "backend.db", state_dir=tmp_path)
    _tokens("sha256_env")(data)
    if value is not None:
        monkeypatch.setenv("DANA_SHA256", value)
    with pytest.raises(ConfigError, match=named.replace(".", r"\.").replace("(", r"\(").replace(")", r"\)")):
        parse_config(data)
    data["approvals"]["tokens"][0]["sha256"] = HASH
    with pytest.raises(ConfigError, match="set sha256 or sha256_env, not both"):
        parse_config(data)


def test_a_webhook_secret_from_a_file_signs_and_a_rotated_file_is_read_at_the_next_notice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    webhook = Webhook(url="https://hooks.example.com/x", secret_env="HOOK_SECRET")
    path = Path(_file(tmp_path, "hook", "first-secret-0123456789\n"))
    monkeypatch.setenv("HOOK_SECRET_FILE", str(path))
    first = signed(webhook, b"{}", now=1_000)
    monkeypatch.setenv("HOOK_SECRET", "first-secret-0123456789")
    monkeypatch.delenv("HOOK_SECRET_FILE")
    assert signed(webhook, b"{}", now=1_000) == first != {}, "the file holds the same secret as the variable would"
    monkeypatch.delenv("HOOK_SECRET")
    monkeypatch.setenv("HOOK_SECRET_FILE", str(path))
    path.write_text("second-secret-0123456789")
    assert signed(webhook, b"{}", now=1_000)[SIGNATURE_HEADER] != first[SIGNATURE_HEADER]
