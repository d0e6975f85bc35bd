"""The keys a gateway generates into its state directory: many processes starting at once on one fresh directory
(replicas on a shared volume, a supervisor restarting fast) all hold the one full key, and no temporary file is
left. Forked processes, so this is in the system tier; key files that are refused: tests/unit/test_key_files.py."""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from multiprocessing.synchronize import Barrier
from pathlib import Path

import pytest

from gateway.identity.secrets import AUDIT_KEY_FILE, KEY_FILE, load_audit_keys, load_keys

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
