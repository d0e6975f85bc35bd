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


def test_the_migrate_output_the_deployment_guide_shows_is_this_gateways() -> None:
    """docs/deployment.md shows what `migrate` prints on an empty database, and the refusal of a schema that is not
    migrated yet: both name the version of the migrations this package ships."""
    from gateway.stores.postgres.schema import SCHEMA_VERSION, migrations

    guide = " ".join((ROOT / "docs" / "deployment.md").read_text().split())
    names = ", ".join(f"{migration.version:04}_{migration.name}" for migration in migrations())
    assert f"migrated from version 0 to {SCHEMA_VERSION}: {names}" in guide
    shown = re.findall(r"this gateway needs version (\d+)", guide)
    assert shown and set(shown) == {str(SCHEMA_VERSION)}


def test_the_approvals_row_says_what_it_needs() -> None:
    """``approvals list`` asks a running gateway's page, with an approver token, even where callers need none."""
    readme = (ROOT / "README.md").read_text()
    row = next(line for line in readme.splitlines() if line.startswith("| `approvals list"))
    assert "--url" in row and "GATEWAY_APPROVER_TOKEN" in row, row


def test_ci_runs_exactly_the_readmes_test_command() -> None:
    readme = (ROOT / "README.md").read_text().splitlines()
    heading = next(n for n, line in enumerate(readme) if line.startswith("**Test**"))
    command = next(line.strip() for line in readme[heading + 1 :] if line.startswith("    "))
    steps = [
        line.strip()
        for line in (ROOT / ".ci" / "run").read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    assert steps[-1] == f"exec {command}", steps
    assert command == "scripts/test --setup"
    assert all("pytest" not in step and "setup-" not in step for step in steps)  # nothing besides it


def test_the_readmes_inspector_commands_run_the_pinned_inspector_on_node_22_from_npm() -> None:
    """On Node 20 a bare ``npx @modelcontextprotocol/inspector`` picks an Inspector that fails; the README's
    commands bring Node 22 and the version the interop tests pin."""
    import json

    readme = (ROOT / "README.md").read_text()
    pinned = json.loads((ROOT / "tests" / "system" / "interop" / "package.json").read_text())["dependencies"]
    commands = [line.strip() for line in readme.splitlines() if line.lstrip().startswith("npx ")]
    assert commands
    spelling = f"npx -y -p node@22 -p @modelcontextprotocol/inspector@{pinned['@modelcontextprotocol/inspector']} --"
    assert all(command.startswith(spelling) for command in commands), commands
