"""``mcp-safety-gateway check``: does this config fit the backend it names?

It validates the file, connects to the backend, confirms the god-tool and its argument names, calls every
mapped read action (lists, lookups, the target read), checks that every configured path finds a value, and
prints the published tools, then their risk (gateway.catalog.risk). Write actions are never called, and the
gateway's own state is never opened: a check run beside a live gateway changes nothing (no store, no key file, no
recovery).

A write action's name is verified without calling it (gateway.backend.actions): against the god-tool's input schema
when it enumerates its actions; otherwise, only when the operator asks (``--probe-actions``), by calling the
god-tool with an action that cannot exist and reading the refusal: a name missing from the list of valid actions
it states is refused (``serve`` does not publish that write either: gateway.catalog.live), and where it states no
list, a name it does not mention is a warning that the action is unverified.

What is checked of one tool is its kind's (gateway.tools.kinds: a read's list, a preview's target read, the action
a write would call); this module runs those steps in order for each backend and prints what they found.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from contextlib import AsyncExitStack

import anyio
from mcp_types import Tool

from gateway.backend import Backend, BackendUnavailable, OutcomeLost, actions
from gateway.backend.client import McpBackend
from gateway.backend.reads import TargetReader
from gateway.catalog.published import PublishedTool
from gateway.catalog.risk import RISK_META
from gateway.config import GatewayConfig
from gateway.config.godtool import enumerated
from gateway.errors import ToolError
from gateway.runtime import load_catalog
from gateway.text import columns, printable, quoted
from gateway.tools.kinds.checking import Checking, Probe, Report, backend_says
from gateway.tools.kinds.registry import kind_of


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
    report.warnings.extend(config.statement_warnings())
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
        out("")
        out(risk_table(catalog))
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
    """What each tool's kind warns of in its own table (an approval rule weaker than the tool's own confirm)."""
    return [warning for name, tool in config.tools.items() for warning in kind_of(tool).warnings(name, tool)]


async def _explain_rules(probes: Mapping[str, Probe], words: list[str], report: Report) -> list[str]:
    """Which approval rule a plan for WRITE_TOOL TARGET [key=value ...] would hit, each rule's verdict on the way.
    The target and lookups are read from the backend; the caller is the local one with every scope, and the
    write counters are zero (a check opens no store)."""
    from gateway.approvals.policy import choose, facts
    from gateway.cli.call.terminal import UsageError, parse_pairs
    from gateway.identity.caller import caller_facts

    config = next(iter(probes.values())).config
    named = config.tools.get(words[0]) if words else None
    if len(words) < 2 or named is None or not kind_of(named).explains:
        names = ", ".join(name for name, tool in config.tools.items() if kind_of(tool).explains)
        report.problem("--explain", f"give a write tool ({names}), a target id and the other arguments as key=value")
        return []
    probe = probes[config.backend_of(words[0])]
    try:
        pairs = parse_pairs(words[2:])
        seen = await kind_of(named).explained(probe, words[0], named, words[1], pairs)
    except (UsageError, ToolError) as err:
        report.problem("--explain", str(err))
        return []
    caller = caller_facts(config, config.gateway.stdio_caller)
    zero = {window: 0 for window in ("minute", "hour", "day")}
    writes = {scope: dict(zero) for scope in ("caller", "tool", "caller_tool", "all")}
    choice, evaluations = choose(
        seen.tool, facts(caller, words[0], words[1], seen.state, seen.summary, seen.arguments, writes)
    )
    lines = ["", f"explain {words[0]} {quoted(words[1])}: {json.dumps(seen.summary)}"]
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


async def _check_backend(probe: Probe, report: Report) -> None:
    section, key = probe.section, probe.key
    tools = {tool.name: tool for tool in await probe.backend.list_tools()}
    mapped = probe.tools()
    if all(tool.relays for tool in mapped.values()) and not probe.lookups():
        report.notes.append(f"{key} publishes {len(tools)} tools; only tools that relay its own tools use it")
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
    checking = Checking(probe, report)
    for name, tool in mapped.items():  # each kind's step; a list is read before the lookups, a target after
        if kind_of(tool).checked_before_lookups:
            await kind_of(tool).check(checking, name, tool)
    for name, lookup in probe.lookups().items():
        try:
            table = await probe.reader.lookup(name, lookup)
            report.notes.append(f"lookups.{name} has {len(table)} entries")
        except ToolError as err:
            action = lookup.call.action if lookup.call is not None else ""
            report.problem(f"lookups.{name}.call", await backend_says(probe, err, action, {}))
    for name, tool in mapped.items():
        if not kind_of(tool).checked_before_lookups:
            await kind_of(tool).check(checking, name, tool)
    await _check_write_actions(probe, god, report, checking.actions)


async def _check_write_actions(probe: Probe, god: Tool, report: Report, writes: Mapping[str, str]) -> None:
    """Every write action's name (by the write tool that would call it), verified without calling it (see the
    module docstring)."""
    if not writes:
        return
    argument = probe.section.action_argument
    listed = enumerated(god.input_schema, argument)
    source = f"the enum of {probe.section.tool}.{argument}"
    complete = listed is not None  # a list of every action (the schema's enum, or one a refusal states)
    if listed is None and probe.probe_actions:
        refusal = await _refusal_of_an_impossible_action(probe)
        if refusal is not None:
            stated = actions.listed_in(refusal)
            complete = stated is not None
            listed = stated if stated is not None else actions.named_in(refusal, writes.values())
            source = "its refusal of an action that cannot exist"
    for name, action in writes.items():
        key = f"tools.{name}.call.action"
        if listed is None:
            hint = "" if probe.probe_actions else "; pass --probe-actions to ask the backend"
            report.warnings.append(f"{key}: {action!r} is unverified (the god-tool does not list its actions){hint}")
        elif action in listed:
            report.notes.append(f"tools.{name} would call {action!r}, listed in {source} (never called by check)")
        elif complete:
            valid = ", ".join(repr(name) for name in listed)
            report.problem(key, f"{action!r} is not one of the god-tool's actions ({valid}, as {source} says)")
        else:
            report.warnings.append(f"{key}: {action!r} is unverified: {source} does not name it")


async def _refusal_of_an_impossible_action(probe: Probe) -> str | None:
    """The god-tool's refusal of an action that cannot exist, or None if it did not refuse."""
    try:
        reply = await probe.backend.read(actions.IMPOSSIBLE, {})
    except BackendUnavailable:
        return None
    return reply.text if reply.is_error else None


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


def risk_table(catalog: dict[str, PublishedTool]) -> str:
    """Each published tool's risk as its ``_meta`` carries it (gateway.catalog.risk; SEP-2793's fields), each line
    led by ``risk`` so that a line led by a tool's name is still its row of the tool table."""
    rows: list[tuple[str, ...]] = [
        ("risk", "tool", "level", "category", "blast radius", "reversibility", "approval", "side effects")
    ]
    for tool in catalog.values():
        risk = (tool.tool.meta or {}).get(RISK_META, {})
        shown = ("riskLevel", "category", "blastRadius", "reversibility", "approvalRecommendation")
        effects = ", ".join(risk.get("sideEffects", [])) or "-"
        rows.append(("risk", tool.name, *(str(risk.get(name, "-")) for name in shown), effects))
    return columns(rows)
