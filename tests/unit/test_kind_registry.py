"""The kind registry is exhaustive: every ``kind`` a tool's table may say is registered (a pass-through's two sides
included), each registered kind carries tools of its own model, and every tool of the shipped and test configs
finds its kind by its ``kind`` alone."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path
from typing import Any

import pytest

import gateway.tools.kinds
from gateway.config import TOOL_KINDS, GatewayConfig, load_config, parse_config
from gateway.config.kinds import tags_of
from gateway.tools.kinds.kind import Kind
from gateway.tools.kinds.passthrough import PASSTHROUGH_WRITE, RELAY
from gateway.tools.kinds.read import READ
from gateway.tools.kinds.registry import KINDS, kind_of
from tests.support.configs import together_data
from tests.support.processes import ROOT
from tests.support.profiles import DATABASES, FLAGS, TENANTS


def registered() -> list[Kind[Any, Any]]:
    return [kind for entry in KINDS.values() for kind in entry.kinds()]


def configs(tmp: Path) -> list[GatewayConfig]:
    """The shipped configs (dbhub's statement tools among them), the test backends' and the two-backend one with
    its pass-through tools."""
    shipped = [load_config(profile.config) for profile in (TENANTS, FLAGS, DATABASES)]
    shipped.append(load_config(ROOT / "config" / "dbhub" / "gateway.toml"))
    return [*shipped, parse_config(together_data(TENANTS, tmp / "backend.db", state_dir=tmp / "state"))]


def test_every_kind_the_config_accepts_is_registered_and_nothing_else() -> None:
    assert list(KINDS) == list(TOOL_KINDS)


def test_each_registered_kind_carries_tools_of_its_own_model() -> None:
    for tag, entry in KINDS.items():
        for kind in entry.kinds():
            assert tags_of([kind.model]) == (tag,), f"{type(kind).__name__} is registered under {tag!r}"


def test_every_kind_the_registry_package_defines_is_registered() -> None:
    for module in pkgutil.iter_modules(gateway.tools.kinds.__path__, "gateway.tools.kinds."):
        importlib.import_module(module.name)
    defined, found = set(), list[type[Any]]([Kind])
    while found:
        cls = found.pop()
        found.extend(cls.__subclasses__())
        if not inspect.isabstract(cls) and cls.__module__.startswith("gateway.tools.kinds."):
            defined.add(cls)
    assert {type(kind) for kind in registered()} == defined
    assert len(registered()) == len(defined), "each kind is one object, registered once"


def test_every_tool_of_the_shipped_and_test_configs_finds_its_kind_and_every_kind_is_used(tmp_path: Path) -> None:
    used = set()
    for config in configs(tmp_path):
        for tool in config.tools.values():
            kind = kind_of(tool)
            assert kind.typed(tool) is tool
            used.add(type(kind))
    assert used == {type(kind) for kind in registered()}, "a test config has a tool of every kind"


def test_a_passthrough_is_relayed_when_it_only_reads_and_written_when_it_writes(tmp_path: Path) -> None:
    config = configs(tmp_path)[-1]
    assert not config.tools["flag_history"].writes and kind_of(config.tools["flag_history"]) is RELAY
    assert config.tools["describe_flag"].writes and kind_of(config.tools["describe_flag"]) is PASSTHROUGH_WRITE


def test_a_kind_refuses_a_config_of_another_model() -> None:
    preview = load_config(ROOT / "gateway/config/gateway.toml").tools["preview_tenant_reset"]
    with pytest.raises(TypeError):
        READ.typed(preview)
