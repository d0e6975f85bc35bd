"""One call of a tool that writes, and the one audit entry its decision leaves.

    AuditedCall       the call: who, which tool, and the facts its entry will say, noted as they are learnt
    decided           run a call's decision and leave exactly one audit entry for it (none for an interim
                      answer: an InputRequiredResult round or a task); the MCP surface's chain wraps every
                      writing tool's call in it, so a refusal by any step is audited with the code the caller sees
    outcome_entry     the constructor of a decision's entry (gateway.audit.entries): applied, or its refusal's
    audited_arguments the plan id and key as the entry may show them, before the arguments are validated

The entry is taken exactly once, by an explicit call: ``seal`` hands it to the key's outcome (stored with it in one
step, gateway.write.driver); ``audit`` stores the entry of a decision that settled no key (a refusal, a replay)
and does nothing once the entry was sealed.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any

import mcp_types as types

from gateway.audit import entries, trail
from gateway.audit.floods import is_flood_candidate
from gateway.catalog.published import IDEMPOTENCY_KEY, PLAN_ID
from gateway.errors import Code, StoreUnavailable, ToolError
from gateway.records import AuditEntry, Task
from gateway.text import printable
from gateway.write.parts import Parts
from gateway.write.progress import Reporter, silent

STORE_DOWN = "The gateway's state store cannot be reached; nothing was sent. Retry with the same idempotencyKey."

Interim = types.InputRequiredResult | Task
"""A call's answer before its decision: a request for input (2026 rounds), or a task to follow (the tasks
extension). Neither leaves an audit entry; the decision that follows does."""
Answer = dict[str, Any] | Interim

log = logging.getLogger(__name__)


@dataclass
class AuditedCall:
    """One call of a tool that writes: who, which tool, and the facts its decision's one audit entry will say."""

    gw: Parts
    name: str
    caller: str
    progress: Reporter = silent
    facts: entries.Facts = field(init=False)
    sealed: bool = field(default=False, init=False)
    approved: bool = field(default=False, init=False)
    """People approved this call's write on the page (url mode): what becomes of it is recorded on the approval."""

    def __post_init__(self) -> None:
        self.facts = entries.Facts(self.caller, self.name)

    def note(self, **facts: Any) -> None:
        """Add facts learnt along the way (target, versions, the user's answer) to the coming audit entry."""
        self.facts = replace(self.facts, **facts)

    def seal(self, entry: entries.Outcome) -> AuditEntry:
        """Take this call's one entry (``entry``: the constructor of its outcome, gateway.audit.entries) to store
        with the key's outcome; ``audit`` stores nothing after this. The user's answer, if there was a prompt, is
        counted here."""
        if self.sealed:
            raise RuntimeError(f"the audit entry of this {self.name} call was sealed already")
        self.sealed = True
        if self.facts.confirmation is not None:
            self.gw.metrics.answers.labels(self.facts.confirmation).inc()
        return entry(self.facts, self.gw.clock())

    async def audit(self, entry: entries.Outcome) -> None:
        """Store the entry of a decision that settled no key (its outcome's entry is sealed with the key instead);
        a refusal that never reached a plan is counted, and stored only as the first of its minute
        (gateway.audit.floods). A store that fails to take it is logged: the caller still gets the answer."""
        if self.sealed:
            return
        sealed = self.seal(entry)
        store, refusals = self.gw.store, self.gw.refusals
        try:
            for report in refusals.due(sealed.at):
                await trail.append(store, report)
            if is_flood_candidate(sealed):
                self.gw.metrics.refusals_before_plan.labels(self.name, sealed.code).inc()
                if not refusals.admit(sealed):
                    return
            await trail.append(store, sealed)
        except Exception as exc:
            log.error("audit entry not stored (%s): %s", type(exc).__name__, sealed)


async def decided(call: AuditedCall, arguments: dict[str, Any], decide: Callable[[], Awaitable[Answer]]) -> Answer:
    """Run ``decide`` and leave exactly one audit entry for its decision (none for an interim answer: an
    InputRequiredResult round or a task).
    A refusal is audited with the code the caller sees; a store that fails before the backend call is sent is
    ``store_unavailable`` (settle's own failure is handled in gateway.write.driver.record_outcome)."""
    call.note(**audited_arguments(arguments))
    try:
        try:
            outcome = await decide()
        except StoreUnavailable:
            raise ToolError(Code.STORE_UNAVAILABLE, STORE_DOWN) from None
    except ToolError as err:
        _count_refusal(call, err.wire_code)
        await call.audit(outcome_entry(err))
        raise
    if not isinstance(outcome, dict):
        return outcome
    await call.audit(entries.replayed if outcome["replayed"] else entries.applied)
    return outcome


def outcome_entry(error: ToolError | None) -> entries.Outcome:
    """The constructor of a decision's entry: applied, or the one its refusal calls for."""
    if error is None:
        return entries.applied
    return lambda facts, at: entries.refusal(facts, at, error)


def _count_refusal(call: AuditedCall, code: str) -> None:
    """A refusal once the write's mode was chosen (a deny, a pending or rejected approval, a declined form) is
    counted by tool, mode, rule and code: the audit entry carries the same mode and rule."""
    chosen = call.facts.extra or {}
    if not call.sealed and "mode" in chosen:
        rule = chosen.get("rule") or "(tool)"
        call.gw.metrics.write_refusals.labels(call.name, chosen["mode"], rule, code).inc()


def audited_arguments(raw: dict[str, Any]) -> dict[str, Any]:
    """The plan id and key for the audit entry, known before the arguments are validated: each as sent when it
    fits its schema pattern, else left out and flagged in ``extra.invalid``, escaped (gateway.text), so a
    refused call cannot put control or bidi characters into the trail an operator reads."""
    facts: dict[str, Any] = {}
    invalid: dict[str, str] = {}
    for name, field_name, schema in (
        ("planId", "plan_id", PLAN_ID),
        ("idempotencyKey", "idempotency_key", IDEMPOTENCY_KEY),
    ):
        value = raw.get(name)
        if isinstance(value, str) and re.fullmatch(schema["pattern"], value):
            facts[field_name] = value
        elif value is not None:
            invalid[name] = printable(value[:128]) if isinstance(value, str) else f"({type(value).__name__})"
    if invalid:
        facts["extra"] = {"invalid": invalid}
    return facts
