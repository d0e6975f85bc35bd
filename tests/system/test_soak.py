"""Short runs of the fault-injection soak (bench/soak.py): faults fire, and no write is duplicated or lost; on
SQLite, and with three replicas on one PostgreSQL database that is restarted mid-run."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.postgres import POSTGRES_MISSING, server_bin


def soak(*args: str) -> dict[str, str]:
    """Run a short soak; its report, line by line (it must have passed: no duplicate, no loss)."""
    command = [sys.executable, "-m", "bench.soak", "--seconds", "8", "--workers", "3", "--max-calls", "400", *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    report = {line[:36].strip(): line[36:].strip() for line in done.stdout.splitlines() if line.strip()}
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    assert report["duplicates"] == "0" and report["losses"] == "0"
    assert "drop-after-write" in report["faults injected"]
    return report


def test_a_short_soak_reports_no_duplicates_and_no_losses() -> None:
    soak()


def test_three_replicas_on_one_postgres_restarted_mid_run_report_no_duplicates_and_no_losses() -> None:
    if server_bin() is None:
        pytest.skip(POSTGRES_MISSING)
    report = soak("--replicas", "3", "--store", "postgres")
    assert "'store restarts': 1" in report["faults injected"] and "'gateway SIGKILL': 1" in report["faults injected"]
