"""Promises about the code's own shape: every error code has one meaning, and the README's troubleshooting table
is the code's table. (That the write path's decisions load no I/O stack takes an interpreter of its own:
tests/system/test_layout_imports.py.)"""

from __future__ import annotations

import ast
import re

from gateway.errors import MEANINGS, Code, markdown_table
from tests.support.processes import ROOT


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
