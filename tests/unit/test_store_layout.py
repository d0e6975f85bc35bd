"""Every store is one shape: a package with one module per role family (gateway.stores.base.FAMILIES), whose class
does exactly that family's operations, composed into the store's class in its ``store`` module. So adding a role to
every store fails here until each store package has it, and each package's docstring names every module in it."""

from __future__ import annotations

import ast
import importlib
import inspect
from types import ModuleType

import pytest

from gateway.stores.base import FAMILIES, ROLES, Store
from tests.support.processes import ROOT

STORES = ["memory", "sqlite", "redis", "postgres"]
MAX_LINES = 400


def _operations(roles: tuple[type, ...]) -> set[str]:
    return {name for role in roles for name in vars(role) if not name.startswith("_")}


def _own_class(module: ModuleType) -> type:
    """The one class a role module defines (helpers it imports are not its own)."""
    classes = [
        value
        for value in vars(module).values()
        if inspect.isclass(value) and value.__module__ == module.__name__ and not value.__name__.startswith("_")
    ]
    assert len(classes) == 1, f"{module.__name__} defines {[c.__name__ for c in classes]}, not one role class"
    return classes[0]


def _store_class(store: str) -> type:
    return _own_class(importlib.import_module(f"gateway.stores.{store}.store"))


def test_every_role_is_in_one_family() -> None:
    roles = [role for family in FAMILIES.values() for role in family]
    assert sorted(role.__name__ for role in roles) == sorted(role.__name__ for role in ROLES if role is not Store)


@pytest.mark.parametrize("store", STORES)
def test_each_family_is_one_module_whose_class_does_exactly_its_operations(store: str) -> None:
    for family, roles in FAMILIES.items():
        role_class = _own_class(importlib.import_module(f"gateway.stores.{store}.{family}"))
        defined = {name for name in vars(role_class) if not name.startswith("_")}
        assert defined == _operations(roles), f"gateway.stores.{store}.{family}.{role_class.__name__}"


@pytest.mark.parametrize("store", STORES)
def test_the_store_class_composes_the_families_and_adds_only_serving_and_closing(store: str) -> None:
    composed = _store_class(store)
    families = {_own_class(importlib.import_module(f"gateway.stores.{store}.{family}")) for family in FAMILIES}
    assert set(composed.__bases__) == families
    assert {name for name in vars(composed) if not name.startswith("_")} == _operations((Store,))


@pytest.mark.parametrize("store", [*STORES, ""])
def test_each_store_package_docstring_names_every_module_in_it(store: str) -> None:
    folder = ROOT / "gateway" / "stores" / store
    docstring = ast.get_docstring(ast.parse((folder / "__init__.py").read_text())) or ""
    listed = {line.split()[0] for line in docstring.splitlines() if line.startswith("    ") and line.split()}
    present = {path.stem for path in folder.glob("*.py") if path.stem != "__init__"}
    present |= {path.name + "/" for path in folder.iterdir() if path.is_dir() and not path.name.startswith("_")}
    assert sorted(present - listed) == []
    assert "Imported by" in docstring  # who may import the package


def test_no_store_module_is_over_the_size_a_reader_takes_in_at_once() -> None:
    sizes = {
        str(path.relative_to(ROOT)): len(path.read_text().splitlines())
        for path in (ROOT / "gateway" / "stores").rglob("*.py")
    }
    assert len(sizes) > 30  # the scan sees every package
    assert {path: lines for path, lines in sizes.items() if lines > MAX_LINES} == {}
