"""The approval rules where a write happens: the write counters as they are now, and the mode a write gets.

    chosen     a pass-through write's mode, decided when it is called (it has no preview to decide at)
    tightened  at write time (before asking, and once more under the target's lock): the rules that read the
               counters or are marked ``recheck`` decide again, and the stricter of that and the mode already
               chosen wins, so a mode only ever tightens
    refused    a ``deny`` refuses, naming the rule; the call's audit entry and gateway_denials_total say so

The rules themselves are pure (gateway.approvals.policy); this module reads what they need from the store and
the request: the counters (gateway.stores ``recent_writes``) and the caller's identity.
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
from gateway.config import ConfirmedTool
from gateway.identity.caller import caller_facts
from gateway.write.driver import AuditedCall
from gateway.write.parts import Parts

State = Callable[[], Awaitable[dict[str, Any]]]
"""Reads the target as the backend reports it now (only when a rule is evaluated)."""


async def counters(gw: Parts, caller: str, tool: str, issued_ago: float | None = None) -> dict[str, dict[str, int]]:
    """The write counters a condition reads, by scope name; ``issued_ago`` (a planned write: how long ago its plan
    was issued, and counted) takes the write's own plan out."""
    scopes = scopes_for(caller, tool)
    counted = await gw.store.recent_writes(list(scopes.values()), gw.clock())
    writes = {name: counted[scope] for name, scope in scopes.items()}
    return writes if issued_ago is None else without_own_plan(writes, issued_ago)


async def chosen(call: AuditedCall, tool: ConfirmedTool, target: str, arguments: dict[str, Any]) -> Choice:
    """The mode of a write decided when it is called: the first rule that holds (failing closed), else the tool's
    own ``confirm``; a ``deny`` refuses."""
    writes = await counters(call.gw, call.caller, call.name) if counts_writes(tool) else {}
    seen = facts(_caller(call), call.name, target, {}, {}, arguments, writes)
    choice, _ = choose(tool, seen)
    return _refused_if_denied(call, choice, "when it is called")


async def tightened_now(
    call: AuditedCall,
    tool: ConfirmedTool,
    choice: Choice,
    target: str,
    state: State,
    summary: dict[str, Any],
    arguments: dict[str, Any],
    issued_ago: float | None = None,
) -> Choice:
    """The rules that read the counters (or are marked ``recheck``) decide again, now; the stricter of that and
    ``choice`` wins, and a ``deny`` refuses."""
    if not rechecked(tool):
        return choice
    writes = await counters(call.gw, call.caller, call.name, issued_ago)
    seen = facts(_caller(call), call.name, target, await state(), summary, arguments, writes)
    return _refused_if_denied(call, tightened(choice, tool, seen), "now (its counters moved since its mode was chosen)")


def _refused_if_denied(call: AuditedCall, choice: Choice, when: str) -> Choice:
    if choice.mode == "deny":
        call.note(extra=decided_by(choice))
        call.gw.metrics.denials.labels(call.name, choice.rule or "(tool)").inc()
        raise denial(choice, when)
    return choice


def _caller(call: AuditedCall) -> dict[str, Any]:
    config = call.gw.config
    return caller_facts(config, config.gateway.stdio_caller)
