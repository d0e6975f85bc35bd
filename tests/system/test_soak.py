"""A short run of the fault-injection soak (bench/soak.py): faults fire, and no write is duplicated or lost."""

from __future__ import annotations

import subprocess
import sys


def test_a_short_soak_reports_no_duplicates_and_no_losses() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.soak", "--seconds", "8", "--workers", "3", "--max-calls", "400"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    report = {line[:36].strip(): line[36:].strip() for line in done.stdout.splitlines() if line.strip()}
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    assert report["duplicates"] == "0" and report["losses"] == "0"
    assert "drop-after-write" in report["faults injected"]
