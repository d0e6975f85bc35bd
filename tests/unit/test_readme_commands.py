"""The README's commands are the ones a newcomer can type: every subcommand is in its table, and the commands
shown for a checkout name the checkout's own entry point."""

from __future__ import annotations

import re

import pytest

from gateway.cli.main import main
from tests.support.processes import ROOT


def choices(capsys: pytest.CaptureFixture[str], *argv: str) -> list[str]:
    """The subcommands ``--help`` offers after ``argv``."""
    with pytest.raises(SystemExit):
        main([*argv, "--help"])
    usage = capsys.readouterr().out
    found = re.search(r"\{([\w,]+)\}", usage)
    assert found, usage
    return found.group(1).split(",")


def test_every_subcommand_is_a_row_of_the_readme_table(capsys: pytest.CaptureFixture[str]) -> None:
    readme = (ROOT / "README.md").read_text()
    rows = [line for line in readme.splitlines() if line.startswith("| `")]
    for command in choices(capsys):
        assert any(row.startswith(f"| `{command}") for row in rows), f"README's subcommand table lacks {command}"
    audit = next(row for row in rows if row.startswith("| `audit"))
    assert all(f" {sub} " in audit.replace("\\|", " ") for sub in choices(capsys, "audit")), audit


def test_the_readme_shows_no_command_that_only_works_somewhere_else() -> None:
    readme = (ROOT / "README.md").read_text()
    blocks = [line.strip() for line in readme.splitlines() if line.startswith("    ")]
    assert [line for line in blocks if line.startswith("mcp-safety-gateway ")] == []
    assert "python -m build" not in readme  # `build` is not installed in the venv; pip wheel is
