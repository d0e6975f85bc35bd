"""``python -m bench.ab``: two gateways from two trees, measured round by round (the harness, not a timing)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.support.processes import PYTHON, ROOT


def test_the_checkout_beside_its_own_commit_gives_every_round_and_the_ratios(tmp_path: Path) -> None:
    out = tmp_path / "ab.json"
    args = [PYTHON, "-m", "bench.ab", "HEAD", "--rounds", "2", "--calls", "100", "--json", str(out)]
    done = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    found = json.loads(out.read_text())
    assert [sorted(each) for each in found["rounds"]] == [["rev", "this"], ["rev", "this"]]
    samples = [sample for each in found["rounds"] for sample in each.values()]
    assert all(sample["server_ms"] > 0 and sample["child_ms"] > 0 and sample["latency_ms"] > 0 for sample in samples)
    assert set(found["ratios"]) == {"server", "child", "latency"} and all(r > 0 for r in found["ratios"].values())
    assert found["store"] == "sqlite" and all(mib > 20 for mib in found["rss_mib"].values())
    assert "gateway CPU per call" in done.stdout and found["commit"] in subprocess.check_output(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, text=True
    )


def test_a_revision_the_repository_lacks_is_named_and_nothing_starts() -> None:
    done = subprocess.run(
        [PYTHON, "-m", "bench.ab", "no-such-rev"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode != 0 and "'no-such-rev' is not a commit of this repository" in done.stderr
    done = subprocess.run(
        [PYTHON, "-m", "bench.ab", "HEAD", "--rounds", "0"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2 and "--rounds and --calls take 1 or more" in done.stderr
