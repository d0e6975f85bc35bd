"""What ``check`` reads a backend through and writes its findings to, for each kind's own check step.

    Report     the problems (each names a config key), warnings and notes a check prints
    Probe      one backend as a check reads it: its client, its reads, the config (no store, no keys)
    Checking   one backend's check as it goes: a kind's step adds what the next ones need (a listed item for a
               target read to try; a write action to verify without calling it)

The order of the steps, and what a check does for the whole config, is gateway.cli.check's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gateway.approvals.policy import weaker_rules
from gateway.backend import Backend, BackendUnavailable
from gateway.backend.reads import TargetReader
from gateway.config import BackendSection, ConfirmedTool, GatewayConfig, Lookup, ToolConfig
from gateway.errors import Code, ToolError
from gateway.text import printable

PROBE_ID = "__gateway_check_absent__"
"""A target id no backend has: a target read must answer 'not found' for it."""


@dataclass
class Report:
    """What the check found: problems (each names a config key), warnings and notes."""

    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def problem(self, key: str, sentence: str) -> None:
        self.problems.append(f"{key}: {sentence}")


@dataclass(frozen=True)
class Probe:
    """What a check of one backend reads through: the config and that backend's reads (no store, no keys)."""

    config: GatewayConfig
    name: str
    section: BackendSection
    backend: Backend
    reader: TargetReader
    readers: Mapping[str, TargetReader]
    probe_actions: bool = False

    async def lookup(self, name: str) -> dict[str, Any]:
        """A lookup table, read from its own backend."""
        return await self.readers[self.config.lookup_backend(name)].lookup(name, self.config.lookups[name])

    @property
    def key(self) -> str:
        """The backend's table in the config: ``backend`` or ``backends.NAME``."""
        return "backend" if self.config.backend is self.section else f"backends.{self.name}"

    def tools(self) -> dict[str, ToolConfig]:
        """The configured tools this backend serves."""
        return {name: tool for name, tool in self.config.tools.items() if self.config.backend_of(name) == self.name}

    def lookups(self) -> dict[str, Lookup]:
        """The lookups read from this backend."""
        config = self.config
        return {name: lookup for name, lookup in config.lookups.items() if config.lookup_backend(name) == self.name}


@dataclass
class Checking:
    """One backend's check as it goes, step by step, each tool by its kind (gateway.tools.kinds)."""

    probe: Probe
    report: Report
    sample: dict[str, Any] | None = None
    """An item a read tool listed, for a target read to try."""
    actions: dict[str, str] = field(default_factory=dict)
    """The god-tool action each write tool would call, by tool name: verified by its name, never called."""


def explained(err: ToolError) -> str:
    """A refusal as an operator reads it in a check (without the caller's 'Nothing was changed')."""
    return err.message.removesuffix(" Nothing was changed.")


async def backend_says(probe: Probe, err: ToolError, action: str, payload: dict[str, Any]) -> str:
    """The refusal, with the backend's own words when it answered with an error (an operator reads this)."""
    if err.code != Code.BACKEND_ERROR:
        return explained(err)
    try:
        reply = await probe.backend.read(action, payload)
    except BackendUnavailable:
        return explained(err)
    return f"{explained(err)} It said: {printable(reply.text[:200])}" if reply.is_error else explained(err)


def peek(item: Any) -> str:
    """A short JSON look at an item, for a sentence about its fields."""
    text = json.dumps(item)
    return text if len(text) <= 120 else text[:119] + "…"


def weaker_rule_warnings(name: str, tool: ConfirmedTool) -> list[str]:
    """A warning for every approval rule of a tool whose mode is weaker than the tool's own confirm."""
    return [
        f"tools.{name}.approval {rule.name}: mode {rule.mode!r} is weaker than the tool's confirm ="
        f" {tool.confirm!r}, so a write this rule matches is confirmed less strictly than the tool's default"
        for rule in weaker_rules(tool)
    ]
