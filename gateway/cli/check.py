"""``mcp-safety-gateway check``: does this config fit the backend it names?

It validates the file, connects to the backend, confirms the god-tool and its argument names, calls every
mapped read action (lists, lookups, the target read), checks that every configured path finds a value, and
prints the published tools. Write actions are never called, and the gateway's own state is never opened: a
check run beside a live gateway changes nothing (no store, no key file, no recovery).

A write action's name is verified without calling it (gateway.cli.actions): against the god-tool's input schema
when it enumerates its actions; otherwise, only when the operator asks (``--probe-actions``), by calling the
god-tool with an action that cannot exist and finding the name in the refusal's list of valid actions;
otherwise the check warns that the action is unverified.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any

import anyio
from mcp_types import Tool

from gateway.backend import Backend, BackendUnavailable, OutcomeLost
from gateway.backend.client import McpBackend
from gateway.backend.reads import TargetReader
from gateway.catalog.published import PublishedTool
from gateway.cli import actions
from gateway.config import (
    BackendSection,
    GatewayConfig,
    Lookup,
    PreviewTool,
    ReadTool,
    ToolConfig,
)
from gateway.config.expressions import MISSING, at_path
from gateway.config.godtool import enumerated
from gateway.errors import Code, ToolError
from gateway.runtime import load_catalog
from gateway.text import columns, printable, quoted

PROBE_ID = "__gateway_check_absent__"


@dataclass
class Report:
    """What the check found: problems (each names a config key), warnings and notes."""

    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def problem(self, key: str, sentence: str) -> None:
        self.problems.append(f"{key}: {sentence}")


async def check(
    config: GatewayConfig,
    out: Callable[[str], None],
    *,
    schemas: bool = False,
    explain: list[str] | None = None,
    probe_actions: bool = False,
    warnings: Sequence[str] = (),
) -> int:
    """Run every check, print the report and the tool table; 0 when nothing is wrong (warnings allowed).
    ``explain`` (WRITE_TOOL TARGET [key=value ...]) also prints which approval rule such a plan would hit;
    ``warnings`` are the caller's own (the command line's: approval links to another local port)."""
    report = Report()
    report.warnings.extend(warnings)
    report.notes.extend(what_leaves(config))
    report.warnings.extend(config.republished_god_tools())
    report.warnings.extend(_weaker_rules(config))
    catalog = None
    explained: list[str] = []
    async with AsyncExitStack() as stack:
        backends: dict[str, Backend] = {}
        for name, section in config.backend_sections().items():
            backends[name] = await stack.enter_async_context(McpBackend(section))
        readers = {name: TargetReader(backend) for name, backend in backends.items()}
        probes = {
            name: Probe(
                config, name, section, backends[name], readers[name], readers, probe_actions or section.probe_actions
            )
            for name, section in config.backend_sections().items()
        }
        for probe in probes.values():
            try:
                with anyio.fail_after(probe.section.connect_timeout_seconds + 3 * probe.section.call_timeout_seconds):
                    await _check_backend(probe, report)
            except (BackendUnavailable, OutcomeLost, TimeoutError):
                report.problem(probe.key, "the backend cannot be reached; check command/args or url")
        if not report.problems:
            loaded = await load_catalog(config, readers, backends)
            for misfit in loaded.misfits.values():
                report.problem(misfit.key, misfit.sentence)
            for name, err in loaded.unavailable.items():
                if name not in loaded.misfits:
                    report.problem(f"tools.{name}", err.message)
            catalog = loaded.tools
        if explain and not report.problems:
            explained = await _explain_rules(probes, explain, report)
    for note in report.notes:
        out(f"ok    {note}")
    for warning in report.warnings:
        out(f"WARN  {warning}")
    for problem in report.problems:
        out(f"FAIL  {problem}")
    if catalog is not None:
        out("")
        out(tool_table(catalog, config))
        if schemas:
            for tool in catalog.values():
                out(f"\n{tool.name} inputSchema:\n{json.dumps(tool.tool.input_schema, indent=2)}")
                out(f"{tool.name} outputSchema:\n{json.dumps(tool.tool.output_schema, indent=2)}")
    for line in explained:
        out(line)
    return 1 if report.problems else 0


def what_leaves(config: GatewayConfig) -> list[str]:
    """What the config sends each backend besides MCP itself, so the operator sees what leaves the machine: an HTTP
    backend's headers (and the variables their values come from), a stdio child's extra environment (names only)."""
    lines = []
    for name, section in config.backend_sections().items():
        key = "backend" if config.backend is section else f"backends.{name}"
        if section.transport == "http":
            sent = ", ".join(
                f"{printable(header)} (from ${printable(var)})" for header, var in section.headers_from_env.items()
            )
            lines.append(f"{key} sends headers {sent}" if sent else f"{key} sends no headers of its own")
        else:
            names = ", ".join(printable(var) for var in section.env)
            lines.append(
                f"{key} starts its child with environment {names} (besides a minimal default one)"
                if names
                else f"{key} starts its child with no environment of its own (a minimal default one)"
            )
    return lines


def _weaker_rules(config: GatewayConfig) -> list[str]:
    """A warning for every approval rule whose mode is weaker than its tool's own confirm."""
    from gateway.approvals.policy import weaker_rules

    warnings = []
    for name, tool in config.tools.items():
        confirmed = tool.as_confirmed()
        if confirmed is None:
            continue
        for rule in weaker_rules(confirmed):
            warnings.append(
                f"tools.{name}.approval {rule.name}: mode {rule.mode!r} is weaker than the tool's confirm ="
                f" {confirmed.confirm!r}, so a write this rule matches is confirmed less strictly than the tool's"
                " default"
            )
    return warnings


async def _explain_rules(probes: Mapping[str, Probe], words: list[str], report: Report) -> list[str]:
    """Which approval rule a plan for WRITE_TOOL TARGET [key=value ...] would hit, each rule's verdict on the way.
    The target and lookups are read from the backend; the caller is the local one with every scope, and the
    write counters are zero (a check opens no store)."""
    from gateway.approvals.policy import choose, facts
    from gateway.cli.call.terminal import UsageError, parse_pairs
    from gateway.identity.caller import caller_facts
    from gateway.tools.preview import effect

    config = next(iter(probes.values())).config
    named = config.tools.get(words[0]) if words else None
    write = named.as_write() if named is not None else None
    if len(words) < 2 or write is None:
        names = ", ".join(name for name, tool in config.tools.items() if tool.as_write() is not None)
        report.problem("--explain", f"give a write tool ({names}), a target id and the other arguments as key=value")
        return []
    preview, probe = config.preview_of(write), probes[config.backend_of(words[0])]
    try:
        args = {**parse_pairs(words[2:]), preview.target_input: words[1]}
        state, summary = await effect(probe.reader, probe.lookup, preview, args)
    except (UsageError, ToolError) as err:
        report.problem("--explain", str(err))
        return []
    caller = caller_facts(config, config.gateway.stdio_caller)
    zero = {window: 0 for window in ("minute", "hour", "day")}
    writes = {scope: dict(zero) for scope in ("caller", "tool", "caller_tool", "all")}
    choice, evaluations = choose(write, facts(caller, words[0], words[1], state, summary, args, writes))
    lines = ["", f"explain {words[0]} {quoted(words[1])}: {json.dumps(summary)}"]
    for evaluation in evaluations:
        verdict = "holds" if evaluation.holds else "does not hold"
        lines.append(
            f"  rule {evaluation.rule}: {verdict}" + (f" (error: {evaluation.error})" if evaluation.error else "")
        )
    if choice.unevaluable is not None:
        lines.append(
            f"  -> rule {choice.unevaluable} cannot be evaluated: fails closed to mode {choice.mode!r}"
            + (f" (by rule {choice.rule})" if choice.rule else " (the tool's own confirm)")
        )
    elif choice.rule is None:
        lines.append(f"  -> no rule holds: the tool's own confirm = {choice.mode!r}")
    else:
        extra = (
            f", approvers {choice.approvers}, four eyes {str(choice.four_eyes).lower()}" if choice.mode == "url" else ""
        )
        lines.append(f"  -> mode {choice.mode!r} by rule {choice.rule}{extra}")
    return lines


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


async def _check_backend(probe: Probe, report: Report) -> None:
    section, key = probe.section, probe.key
    tools = {tool.name: tool for tool in await probe.backend.list_tools()}
    mapped = probe.tools()
    if all(tool.relays for tool in mapped.values()) and not probe.lookups():
        report.notes.append(f"{key} publishes {len(tools)} tools; only pass-through tools use it")
        return
    god = tools.get(section.tool)
    if god is None:
        report.problem(f"{key}.tool", f"the backend has no tool {section.tool!r}; it has {sorted(tools)}")
        return
    report.notes.append(f"{key} publishes {section.tool}")
    properties = god.input_schema.get("properties", {})
    for argument in ("action_argument", "payload_argument"):
        name = getattr(section, argument)
        if properties and name not in properties:
            report.problem(f"{key}.{argument}", f"{section.tool} has no argument {name!r}; it has {sorted(properties)}")
    sample: dict[str, Any] | None = None
    for name, tool in mapped.items():
        read = tool.as_read()
        if read is not None:
            sample = await _check_read(probe, name, read, report) or sample
    for name, lookup in probe.lookups().items():
        try:
            table = await probe.reader.lookup(name, lookup)
            report.notes.append(f"lookups.{name} has {len(table)} entries")
        except ToolError as err:
            action = lookup.call.action if lookup.call is not None else ""
            report.problem(f"lookups.{name}.call", await _backend_says(probe, err, action, {}))
    for name, tool in mapped.items():
        preview = tool.as_preview()
        if preview is not None:
            await _check_preview(probe, name, preview, sample, report)
    await _check_write_actions(probe, god, report)


async def _check_write_actions(probe: Probe, god: Tool, report: Report) -> None:
    """Every write action's name, verified without calling it (see the module docstring)."""
    planned = {name: tool.as_write() for name, tool in probe.tools().items()}
    writes = {name: write.call.action for name, write in planned.items() if write is not None}
    if not writes:
        return
    argument = probe.section.action_argument
    listed = enumerated(god.input_schema, argument)
    source = f"the enum of {probe.section.tool}.{argument}"
    if listed is None and probe.probe_actions:
        refusal = await _refusal_of_an_impossible_action(probe)
        if refusal is not None:
            listed, source = actions.named_in(refusal, writes.values()), "its refusal of an action that cannot exist"
    for name, action in writes.items():
        key = f"tools.{name}.call.action"
        if listed is None:
            hint = "" if probe.probe_actions else "; pass --probe-actions to ask the backend"
            report.warnings.append(f"{key}: {action!r} is unverified (the god-tool does not list its actions){hint}")
        elif action in listed:
            report.notes.append(f"tools.{name} would call {action!r}, listed in {source} (never called by check)")
        elif source.startswith("its refusal"):
            report.warnings.append(f"{key}: {action!r} is unverified: {source} does not name it")
        else:
            report.problem(key, f"{action!r} is not one of the god-tool's actions {sorted(listed)}")


async def _refusal_of_an_impossible_action(probe: Probe) -> str | None:
    """The god-tool's refusal of an action that cannot exist, or None if it did not refuse."""
    try:
        reply = await probe.backend.read(actions.IMPOSSIBLE, {})
    except BackendUnavailable:
        return None
    return reply.text if reply.is_error else None


async def _check_read(probe: Probe, name: str, tool: ReadTool, report: Report) -> dict[str, Any] | None:
    try:
        items = await probe.reader.items(tool.call)
    except ToolError as err:
        report.problem(f"tools.{name}.call", await _backend_says(probe, err, tool.call.action, {}))
        return None
    report.notes.append(f"tools.{name}: {tool.call.action!r} lists {len(items)} items")
    if not items:
        return None
    first = items[0]
    if at_path(first, tool.sort_key) is MISSING:
        report.problem(f"tools.{name}.sort_key", f"the backend's items have no {tool.sort_key!r}")
    for field_name, output in tool.fields.items():
        if at_path(first, output.source) is MISSING:
            report.problem(
                f"tools.{name}.fields.{field_name}.from",
                f"the backend's items have no {output.source!r} (an item looks like {_peek(first)})",
            )
    return first if isinstance(first, dict) else None


async def _check_preview(
    probe: Probe, name: str, tool: PreviewTool, sample: dict[str, Any] | None, report: Report
) -> None:
    target = tool.target
    try:
        await probe.reader.get(target, PROBE_ID)
        report.problem(f"tools.{name}.target.get", f"reading a target that cannot exist ({PROBE_ID}) succeeded")
    except ToolError as err:
        if err.code != Code.TARGET_NOT_FOUND:
            report.problem(
                f"tools.{name}.target.get.action",
                f"{target.get.action!r} did not answer 'not found' for an absent id "
                f"({await _backend_says(probe, err, target.get.action, {})}); "
                f"check the action name and target.not_found_text",
            )
            return
    report.notes.append(f"tools.{name}: {target.get.action!r} answers 'not found' for an absent {target.noun}")
    if sample is None:
        return
    for key in ("id", "key", "name"):
        if isinstance(sample.get(key), str):
            break
    else:
        return
    try:
        state = await probe.reader.get(target, sample[key])
    except ToolError as err:
        report.problem(f"tools.{name}.target.get", f"reading {sample[key]!r} failed: {_explain(err)}")
        return
    if target.id_in(state) is MISSING:
        report.problem(f"tools.{name}.target.id_field", f"the {target.noun} has no string {target.id_field!r}")
    if target.version_in(state) is MISSING:
        report.problem(f"tools.{name}.target.version_field", f"the {target.noun} has no {target.version_field!r}")
    for field_name, summary in tool.summary.items():
        if summary.target is not None and at_path(state, summary.target) is MISSING:
            report.problem(f"tools.{name}.summary.{field_name}.target", f"the {target.noun} has no {summary.target!r}")
    if target.protected_field is not None and at_path(state, target.protected_field) is MISSING:
        report.problem(f"tools.{name}.target.protected_field", f"the {target.noun} has no {target.protected_field!r}")


def tool_table(catalog: dict[str, PublishedTool], config: GatewayConfig) -> str:
    """The published tools with their kind, hints, backend action (or the backend's own tool) and backend."""
    rows = [("tool", "kind", "readOnly", "destructive", "idempotent", "openWorld", "backend action", "backend")]
    for tool in catalog.values():
        hints = tool.tool.annotations
        assert hints is not None
        rows.append(
            (
                tool.name,
                tool.config.kind,
                str(hints.read_only_hint).lower(),
                str(hints.destructive_hint).lower(),
                str(hints.idempotent_hint).lower(),
                str(hints.open_world_hint).lower(),
                tool.config.backend_action(tool.name),
                config.backend_of(tool.name),
            )
        )
    return columns(rows)


def _explain(err: ToolError) -> str:
    return err.message.removesuffix(" Nothing was changed.")


async def _backend_says(probe: Probe, err: ToolError, action: str, payload: dict[str, Any]) -> str:
    """The refusal, with the backend's own words when it answered with an error (an operator reads this)."""
    if err.code != Code.BACKEND_ERROR:
        return _explain(err)
    try:
        reply = await probe.backend.read(action, payload)
    except BackendUnavailable:
        return _explain(err)
    return f"{_explain(err)} It said: {printable(reply.text[:200])}" if reply.is_error else _explain(err)


def _peek(item: Any) -> str:
    text = json.dumps(item)
    return text if len(text) <= 120 else text[:119] + "…"
