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


KIND_CLASSES = {"ReadTool", "PreviewTool", "WriteTool", "PassthroughTool"}
KIND_REGISTRY = "gateway/tools/kinds.py"


def _names_in(node: ast.expr) -> set[str]:
    """The class names a type test's second argument spells: a name, a dotted name, a tuple or a ``|`` union."""
    if isinstance(node, ast.Name):
        return {node.id}
    if isinstance(node, ast.Attribute):
        return {node.attr}
    if isinstance(node, ast.Tuple):
        return {name for element in node.elts for name in _names_in(element)}
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _names_in(node.left) | _names_in(node.right)
    return set()


def kind_tests(source: str) -> list[int]:
    """The lines of a module that test a tool config's class: ``isinstance`` or a ``match`` class pattern."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance":
            if len(node.args) == 2 and _names_in(node.args[1]) & KIND_CLASSES:
                lines.append(node.lineno)
        elif isinstance(node, ast.MatchClass) and _names_in(node.cls) & KIND_CLASSES:
            lines.append(node.lineno)
    return lines


def test_the_scan_for_kind_tests_sees_each_spelling() -> None:
    spellings = [
        "isinstance(tool, WriteTool)",
        "isinstance(tool, config.ReadTool)",
        "isinstance(tool, (ReadTool, PreviewTool))",
        "isinstance(tool, WriteTool | PassthroughTool)",
        "match tool:\n    case PreviewTool():\n        pass",
    ]
    assert [bool(kind_tests(source)) for source in spellings] == [True] * len(spellings)
    assert kind_tests("isinstance(tool, dict)\nisinstance(tool.kind, str)") == []


def test_only_the_kind_registry_tests_a_tool_configs_class() -> None:
    found = {
        f"{path.relative_to(ROOT)}:{line}"
        for path in sorted((ROOT / "gateway").rglob("*.py"))
        if path.relative_to(ROOT).as_posix() != KIND_REGISTRY
        for line in kind_tests(path.read_text())
    }
    assert sorted(found) == [], "ask the tool's kind (gateway.config.kinds) instead, or add to gateway/tools/kinds.py"
    assert kind_tests((ROOT / KIND_REGISTRY).read_text()), "the registry is where a config's class is told apart"


def test_the_readme_names_the_chain_in_the_codes_order() -> None:
    from gateway.mcp.chain import CHAIN

    readme = (ROOT / "README.md").read_text()
    row = next(line for line in readme.splitlines() if line.startswith("| then one ordered chain:"))
    spoken = [step.__name__.replace("_", " ") for step in CHAIN]
    where = [row.find(words) for words in spoken]
    assert -1 not in where, f"the README's chain row must name {spoken}"
    assert where == sorted(where), f"the README's chain row names the steps out of the code's order {spoken}"
