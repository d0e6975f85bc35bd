"""Promises about the code's own shape: every error code has one meaning, and the README's troubleshooting table
is the code's table. (That the write path's decisions load no I/O stack takes an interpreter of its own:
tests/system/test_layout_imports.py.)"""

from __future__ import annotations

import ast
import inspect
import re
from typing import get_args

from gateway.config import TOOL_KINDS, ToolConfig, ToolKind
from gateway.errors import MEANINGS, Code, markdown_table
from gateway.tools.kinds.kind import narrowed
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


def test_every_folders_docstring_names_its_modules_and_each_top_folder_says_who_imports_it() -> None:
    package = ROOT / "gateway"
    unnamed, silent = {}, []
    for init in sorted(package.rglob("__init__.py")):
        folder = init.parent
        docstring = ast.get_docstring(ast.parse(init.read_text())) or ""
        parts = {path.stem for path in folder.glob("*.py")} - {"__init__", "__main__"}
        parts |= {path.name for path in folder.iterdir() if path.is_dir() and any(path.glob("*.py"))}
        missing = sorted(name for name in parts if not re.search(rf"(?<!\w){re.escape(name)}(?!\w)", docstring))
        if missing:
            unnamed[str(folder.relative_to(ROOT))] = missing
        if folder.parent == package and not re.search(r"\b[Ii]mport(s|ed)\b", docstring):
            silent.append(str(folder.relative_to(ROOT)))
    assert unnamed == {}, "each folder's docstring names every module and folder in it"
    assert silent == [], "each top folder's docstring says who may import it (and what it imports)"


KIND_MODELS = set(get_args(get_args(ToolConfig)[0]))
KIND_CLASSES = {model.__name__ for model in KIND_MODELS} | {"ToolKind", "ConfirmedTool"}
"""Every tool config model (from the config's own union, so a new kind is scanned for too) and their bases."""
KIND_REGISTRY = "gateway/tools/kinds/"


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


def _is_kind(node: ast.expr) -> bool:
    """A discriminator: ``tool.kind`` (or ``tool["kind"]``)."""
    if isinstance(node, ast.Attribute):
        return node.attr == "kind"
    return isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and node.slice.value == "kind"


def _tags_in(node: ast.AST) -> set[str]:
    """The tool kinds a constant (or a tuple, list or set of them, or a ``case`` pattern) spells."""
    if isinstance(node, ast.MatchValue):
        return _tags_in(node.value)
    if isinstance(node, ast.MatchOr):
        return {tag for part in node.patterns for tag in _tags_in(part)}
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return {tag for part in node.elts for tag in _tags_in(part)}
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value} & set(TOOL_KINDS)
    return set()


def _tests_kind(node: ast.AST) -> bool:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance":
        return len(node.args) == 2 and bool(_names_in(node.args[1]) & KIND_CLASSES)
    if isinstance(node, ast.MatchClass):
        return bool(_names_in(node.cls) & KIND_CLASSES)
    if isinstance(node, ast.Compare):  # a discriminator against a tool kind's name (a statement's kind is not)
        sides = (node.left, *node.comparators)
        return any(_is_kind(side) for side in sides) and any(_tags_in(side) for side in sides)
    if isinstance(node, ast.Match):
        return _is_kind(node.subject) and any(_tags_in(case.pattern) for case in node.cases)
    return False


def kind_tests(source: str) -> list[int]:
    """The lines of a module that test a tool config's class or kind: ``isinstance``, a ``match`` class pattern, a
    comparison of its ``kind``, or a ``match`` on it."""
    return [node.lineno for node in ast.walk(ast.parse(source)) if _tests_kind(node)]  # type: ignore[attr-defined]


def test_the_scan_for_kind_tests_sees_each_spelling() -> None:
    spellings = [
        "isinstance(tool, WriteTool)",
        "isinstance(tool, config.ReadTool)",
        "isinstance(tool, (ReadTool, PreviewTool))",
        "isinstance(tool, WriteTool | PassthroughTool)",
        "isinstance(tool, ConfirmedTool)",
        "match tool:\n    case PreviewTool():\n        pass",
        'tool.kind == "write"',
        'if "preview" != config.tools[name].kind: pass',
        'tool.kind in ("read", "preview")',
        'body["kind"] == "write"',
        'match tool.kind:\n    case "read":\n        pass',
    ]
    assert [bool(kind_tests(source)) for source in spellings] == [True] * len(spellings)
    unrelated = "isinstance(tool, dict)\nisinstance(tool.kind, str)\nrow = (tool.kind, name)\nsyntax.kind != READ\n"
    assert kind_tests(unrelated + 'statement.kind == "delete"') == []


def test_only_the_kind_registry_tests_a_tool_configs_class() -> None:
    found = {
        f"{path.relative_to(ROOT)}:{line}"
        for path in sorted((ROOT / "gateway").rglob("*.py"))
        if not path.relative_to(ROOT).as_posix().startswith(KIND_REGISTRY)
        for line in kind_tests(path.read_text())
    }
    assert sorted(found) == [], "ask the tool's kind (gateway.tools.kinds) or its model instead of testing its class"
    registry = sorted((ROOT / KIND_REGISTRY).glob("*.py"))
    assert registry, "the registry is a package"
    ladders = {f"{path.name}:{line}" for path in registry for line in kind_tests(path.read_text())}
    assert sorted(ladders) == [], "the registry finds a kind by its config's kind in one dict, never by a ladder"
    assert "isinstance(config, model)" in inspect.getsource(narrowed), "a config is told apart by its kind's model"


def test_no_config_model_offers_a_downcast() -> None:
    models, seen = [ToolKind], []
    while models:
        model = models.pop()
        seen.append(model)
        models.extend(model.__subclasses__())
    assert set(seen) >= KIND_MODELS
    downcasts = sorted(f"{model.__name__}.{name}" for model in seen for name in vars(model) if name.startswith("as_"))
    assert downcasts == [], "a model answers questions about its tool; it never hands itself over as another type"


def test_the_readme_names_the_chain_in_the_codes_order() -> None:
    from gateway.mcp.chain import CHAIN

    readme = (ROOT / "README.md").read_text()
    row = next(line for line in readme.splitlines() if line.startswith("| then one ordered chain:"))
    spoken = [step.__name__.replace("_", " ") for step in CHAIN]
    where = [row.find(words) for words in spoken]
    assert -1 not in where, f"the README's chain row must name {spoken}"
    assert where == sorted(where), f"the README's chain row names the steps out of the code's order {spoken}"
