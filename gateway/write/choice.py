"""The approval rules where a write is decided: the write counters as they are now, and the mode a write gets.

    at_preview a planned write's mode, decided when its plan is issued: a ``deny`` refuses the plan (audited
               ``denied``); any other mode is kept on the plan, which counts against the budgets from then on
    chosen     a pass-through write's mode, decided when it is called (it has no preview to decide at)
    tightened  at write time (before asking, and once more under the target's lock): the rules that read the
               counters or are marked ``recheck`` decide again, and the stricter of that and the mode already
               chosen wins, so a mode only ever tightens
    refused    a ``deny`` at write time refuses, naming the rule; the call's audit entry and
               gateway_denials_total say so

The rules themselves are pure (gateway.approvals.policy); this module reads what they need from the store and
the request: the counters (gateway.stores ``recent_writes``: writes, and the rows they touch) and the caller's
identity.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from gateway.approvals.policy import (
    Choice,
    choose,
    counts_writes,
    decided_by,
    denial,
    facts,
    rechecked,
    scopes_for,
    tightened,
    without_own_plan,
)
from gateway.audit import entries, trail
from gateway.config import ConfirmedTool
from gateway.identity.caller import caller_facts
from gateway.write.audited import AuditedCall
from gateway.write.parts import Parts

State = Callable[[], Awaitable[dict[str, Any]]]
"""Reads the target as the backend reports it now (only when a rule is evaluated)."""


async def counters(
    gw: Parts, caller: str, tool: str, issued_ago: float | None = None, rows: int | None = None
) -> dict[str, dict[str, int]]:
    """The write counters a condition reads, by scope name; ``issued_ago`` (a planned write: how long ago its plan
    was issued, and counted) takes the write's own plan out. With ``rows`` (the write's own rows), the rows those
    writes touched instead of their number."""
    scopes = scopes_for(caller, tool)
    counted = await gw.store.recent_writes(list(scopes.values()), gw.clock(), rows=rows is not None)
    writes = {name: counted[scope] for name, scope in scopes.items()}
    return writes if issued_ago is None else without_own_plan(writes, issued_ago, 1 if rows is None else rows)


def _rows_of(statement: dict[str, Any] | None) -> int:
    """The rows a write counts in the ``rows`` budgets: a statement's measured rows, else 0."""
    rows = (statement or {}).get("rows")
    return rows if isinstance(rows, int) and not isinstance(rows, bool) and rows > 0 else 0


async def at_preview(
    gw: Parts,
    name: str,
    tool: ConfirmedTool,
    caller: str,
    target: str,
    state: dict[str, Any],
    summary: dict[str, Any],
    arguments: dict[str, Any],
    statement: dict[str, Any] | None = None,
) -> Choice:
    """The mode the plan of write tool ``name`` will need; a ``deny`` refuses here, with its own audit entry.
    ``statement``: a statement tool's facts (gateway.approvals.policy)."""
    choice = await _first_holding(gw, name, tool, target, state, summary, arguments, statement)
    if choice.mode == "deny":
        gw.metrics.denials.labels(name, choice.rule or "(tool)").inc()
        await trail.append(gw.store, entries.denied(gw.clock(), caller, name, target, choice.rule))
        raise denial(choice, "at preview")
    # A plan counts against the budgets from its issue on, so previewing ahead of a write buys nothing.
    await gw.store.count_write(list(scopes_for(caller, name).values()), gw.clock(), _rows_of(statement))
    return choice


async def chosen(call: AuditedCall, tool: ConfirmedTool, target: str, arguments: dict[str, Any]) -> Choice:
    """The mode of a write decided when it is called; a ``deny`` refuses."""
    choice = await _first_holding(call.gw, call.name, tool, target, {}, {}, arguments)
    return _refused_if_denied(call, choice, "when it is called")


async def _first_holding(
    gw: Parts,
    name: str,
    tool: ConfirmedTool,
    target: str,
    state: dict[str, Any],
    summary: dict[str, Any],
    arguments: dict[str, Any],
    statement: dict[str, Any] | None = None,
) -> Choice:
    """The first rule that holds for the calling caller (failing closed), else the tool's own ``confirm``; the
    counters are read only when a rule reads them."""
    caller = _caller(gw)
    writes = await counters(gw, caller["id"], name) if counts_writes(tool, "writes") else {}
    rows = await counters(gw, caller["id"], name, rows=0) if counts_writes(tool, "rows") else {}
    choice, _ = choose(tool, facts(caller, name, target, state, summary, arguments, writes, statement, rows))
    return choice


async def tightened_now(
    call: AuditedCall,
    tool: ConfirmedTool,
    choice: Choice,
    target: str,
    state: State,
    summary: dict[str, Any],
    arguments: dict[str, Any],
    issued_ago: float | None = None,
    statement: dict[str, Any] | None = None,
) -> Choice:
    """The rules that read the counters (or are marked ``recheck``) decide again, now; the stricter of that and
    ``choice`` wins, and a ``deny`` refuses."""
    if not rechecked(tool):
        return choice
    writes = await counters(call.gw, call.caller, call.name, issued_ago) if counts_writes(tool, "writes") else {}
    own_rows = _rows_of(statement)
    rows = await counters(call.gw, call.caller, call.name, issued_ago, own_rows) if counts_writes(tool, "rows") else {}
    seen = facts(_caller(call.gw), call.name, target, await state(), summary, arguments, writes, statement, rows)
    return _refused_if_denied(call, tightened(choice, tool, seen), "now (its counters moved since its mode was chosen)")


def _refused_if_denied(call: AuditedCall, choice: Choice, when: str) -> Choice:
    if choice.mode == "deny":
        call.note(extra=decided_by(choice))
        call.gw.metrics.denials.labels(call.name, choice.rule or "(tool)").inc()
        raise denial(choice, when)
    return choice


def _caller(gw: Parts) -> dict[str, Any]:
    return caller_facts(gw.config, gw.config.gateway.stdio_caller)
