"""Promises about the code's own shape: the write path's decisions load no I/O stack, every error code has one
meaning, and the README's troubleshooting table is the code's table."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys

from gateway.errors import MEANINGS, Code, markdown_table
from tests.support.processes import ROOT

IO_MODULES = ("httpx", "httpx2", "starlette", "uvicorn", "sqlite3", "redis", "mcp", "mcp.client", "anyio")


def test_the_write_decisions_import_no_io_stack() -> None:
    probe = "import json, sys; import gateway.write.steps; print(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT)
    loaded = set(json.loads(done.stdout))
    assert "gateway.write.steps" in loaded
    assert sorted(loaded & set(IO_MODULES)) == []
    ours = {name for name in loaded if name.startswith("gateway.")}
    allowed = {
        "gateway.config",
        "gateway.records",
        "gateway.errors",
        "gateway.config.expressions",
        "gateway.text",
        "gateway.write",
    }
    assert {name for name in ours if not name.startswith(("gateway.config.", "gateway.write."))} <= allowed
    assert {name for name in ours if name.startswith("gateway.write.")} == {"gateway.write.steps"}


def test_every_error_code_has_a_meaning_and_a_next_step() -> None:
    assert set(MEANINGS) == set(Code)
    assert all(meaning.happened and meaning.next_step for meaning in MEANINGS.values())


def test_the_readme_troubleshooting_table_is_the_codes_table() -> None:
    readme = (ROOT / "README.md").read_text()
    assert markdown_table() in readme, "regenerate the README table: .venv/bin/python -m gateway.errors"


def test_every_file_the_readme_names_exists() -> None:
    readme = (ROOT / "README.md").read_text()
    named = set(re.findall(r"`(gateway/[\w/]+(?:\.py|/))`", readme))
    assert named, "the README names the files a call passes"
    assert sorted(path for path in named if not (ROOT / path).exists()) == []


def test_the_top_of_the_package_holds_few_modules_and_every_folder_says_its_role() -> None:
    package = ROOT / "gateway"
    top = sorted(path.name for path in package.glob("*.py"))
    assert len(top) <= 11, top  # __init__, __main__ and the shared bottom floor (records, errors, text, ...)
    for folder in sorted(path.parent for path in package.rglob("__init__.py")):
        docstring = ast.get_docstring(ast.parse((folder / "__init__.py").read_text()))
        assert docstring, f"{folder.relative_to(ROOT)}/__init__.py has no docstring stating its role"
