"""The keys a gateway generates into its state directory: many processes starting at once on one fresh directory
(replicas on a shared volume, a supervisor restarting fast) all hold the one full key, and a key file that is
empty or too short is refused in a sentence naming it, never taken as a key."""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from multiprocessing.synchronize import Barrier
from pathlib import Path

import pytest

from gateway.cli.main import main
from gateway.config import to_toml
from gateway.identity.secrets import AUDIT_KEY_FILE, KEY_FILE, load_audit_keys, load_keys
from tests.support.configs import config_data
from tests.support.profiles import TENANTS

PROCESSES = 8
ROUNDS = 30
LOADERS: dict[str, Callable[[Path], list[bytes]]] = {"secret": load_keys, "audit": load_audit_keys}
LOADERS_FILE = {"secret": KEY_FILE, "audit": AUDIT_KEY_FILE}


def _load_at_once(directory: Path, which: str, start: Barrier, results: multiprocessing.Queue[str]) -> None:
    start.wait()
    try:
        keys = LOADERS[which](directory)
        results.put("key " + b",".join(keys).decode())
    except BaseException as exc:
        results.put(f"error {type(exc).__name__}: {exc}")


@pytest.mark.parametrize("which", sorted(LOADERS))
def test_processes_starting_at_once_on_a_fresh_directory_all_hold_one_full_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, which: str
) -> None:
    monkeypatch.delenv("GATEWAY_SECRET_KEY", raising=False)
    monkeypatch.delenv("GATEWAY_AUDIT_KEY", raising=False)
    forked = multiprocessing.get_context("fork")
    for round_ in range(ROUNDS):
        directory = tmp_path / f"round{round_}" / "state"  # not there yet: the first process makes it
        start = forked.Barrier(PROCESSES)
        results: multiprocessing.Queue[str] = forked.Queue()
        load = (directory, which, start, results)
        children = [forked.Process(target=_load_at_once, args=load) for _ in range(PROCESSES)]
        for child in children:
            child.start()
        heard = sorted(results.get(timeout=30) for _ in children)
        for child in children:
            child.join(timeout=30)
        assert [line for line in heard if line.startswith("error")] == [], f"round {round_}"
        assert len(set(heard)) == 1, f"round {round_}: the processes hold different keys"
        assert len(heard[0].removeprefix("key ")) == 64, f"round {round_}: the key is not a full generated one"
        assert sorted(path.name for path in directory.iterdir()) == [LOADERS_FILE[which]], "no temporary file is left"


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
        LOADERS["secret" if file_name == KEY_FILE else "audit"](state)
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
