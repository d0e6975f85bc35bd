"""What every tool that writes shares: its one audit entry, and the one claim -> send -> settle skeleton.

    AuditedCall    one call of a writing tool and the audit entry its decision leaves
    decided        run a call's decision and leave exactly one audit entry for it (none for an input round)
    apply_claimed  step 8 and 9 for any write: lock, claim, send once, settle with the entry, answer
    send_claimed   the backend call under a claimed key; outcome_of the decision about its reply;
    record_outcome the key settled together with its entry

A write says what is particular to it by filling in the hooks of ``ClaimedWrite`` (gateway.write.planned for a planned
write, gateway.write.passthrough for a backend's own tool); the order of the steps, the crash points, the shield
against cancellation and what an exception at each point does are written here once.

Once the key is claimed, the rest runs shielded from cancellation, so a caller that hangs up mid-write cannot
leave the key in flight: the backend call (bounded by its timeout) and the record always finish. Nor can an
exception: one before the backend call releases the key, one after it settles the key with the write's outcome
(unknown when that cannot be told), and a store that cannot take the outcome has it kept (gateway.write.unsettled)
while the caller is told the truth.

The audit entry is taken exactly once, by an explicit call: ``seal`` hands the entry to the key's outcome (stored
with it in one step); ``audit`` stores the entry of a decision that settled no key (a refusal, a replay) and does
nothing once the entry was sealed.
"""

from __future__ import annotations

import logging
import re
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any

import anyio
import mcp_types as types

from gateway.approvals import results
from gateway.audit import entries, trail
from gateway.audit.floods import is_flood_candidate
from gateway.backend import BackendUnavailable, OutcomeLost, unreachable
from gateway.catalog.published import IDEMPOTENCY_KEY, PLAN_ID
from gateway.crashpoints import crash_point
from gateway.errors import Code, StoreUnavailable, ToolError
from gateway.records import AuditEntry, KeyRecord, Plan, Reply, Task
from gateway.text import printable
from gateway.write.parts import Parts
from gateway.write.progress import CALLING, DONE, Reporter, silent
from gateway.write.steps import LOST, Settlement, next_key_state, outcome_unknown_body

STORE_DOWN = "The gateway's state store cannot be reached; nothing was sent. Retry with the same idempotencyKey."
NOTHING_SENT = "The gateway failed before sending the write; nothing was changed. Call {} again, or retry later."

Interim = types.InputRequiredResult | Task
"""A call's answer before its decision: a request for input (2026 rounds), or a task to follow (the tasks
extension). Neither leaves an audit entry; the decision that follows does."""
Answer = dict[str, Any] | Interim
Sender = Callable[[], Awaitable[Reply]]

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
    ``backend_unavailable`` (settle's own failure is handled in record_outcome)."""
    call.note(**audited_arguments(arguments))
    try:
        try:
            outcome = await decide()
        except StoreUnavailable:
            raise ToolError(Code.BACKEND_UNAVAILABLE, STORE_DOWN) from None
    except ToolError as err:
        _count_refusal(call, err.wire_code)
        await call.audit(_outcome(err))
        raise
    if not isinstance(outcome, dict):
        return outcome
    await call.audit(entries.replayed if outcome["replayed"] else entries.applied)
    return outcome


def _outcome(error: ToolError | None) -> entries.Outcome:
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


class ClaimedWrite(AuditedCall, ABC):
    """A writing call that ``apply_claimed`` carries out: what is particular to it, as hooks."""

    @property
    @abstractmethod
    def retention_seconds(self) -> float:
        """How long the key's outcome is kept for replay."""

    @property
    @abstractmethod
    def start_over(self) -> str | None:
        """The tool that begins a new attempt (a preview), named when nothing was sent."""

    @abstractmethod
    async def before_claim(self, plan: Plan) -> None:
        """Under the target's lock, before the key is claimed: the last checks (may refuse)."""

    @abstractmethod
    async def prepared(self, plan: Plan) -> Sender:
        """Under the claimed key: re-check what must still hold and build the backend call, sending nothing."""

    @abstractmethod
    async def outcome(self, plan: Plan, reply: Reply | None) -> Settlement:
        """Step 9's decision about a sent write's reply (LOST when none came)."""

    @abstractmethod
    async def not_claimed(self, plan: Plan, record: KeyRecord, existing: KeyRecord | None) -> dict[str, Any]:
        """The answer when another call holds the key or the plan: its replay, or why this one cannot proceed."""


async def apply_claimed(write: ClaimedWrite, plan: Plan, record: KeyRecord) -> dict[str, Any]:
    """Steps 8 and 9: under the target's lock, claim the key and the plan in one step, send the write once, and
    settle the key with the call's audit entry. Returns the applied result; raises the settled refusal. For a
    write people approved, what became of it is also kept on its approval, for the page (approvals.results)."""
    if not write.approved:
        return await _apply(write, plan, record)
    try:
        answer = await _apply(write, plan, record)
    except ToolError as refusal:
        await results.refused(write.gw.store, plan.plan_id, refusal, write.gw.clock(), past_approval=True)
        raise
    await results.applied(write.gw.store, plan.plan_id, answer, write.gw.clock())
    return answer


async def _apply(write: ClaimedWrite, plan: Plan, record: KeyRecord) -> dict[str, Any]:
    store = write.gw.store
    async with store.lock(plan.target):
        await write.before_claim(plan)
        crash_point("before-claim")
        claim = await store.claim(record, write.gw.clock(), write.retention_seconds)
        if not claim.claimed:
            return await write.not_claimed(plan, record, claim.existing)
        with anyio.CancelScope(shield=True):
            crash_point("after-claim")
            reply = await send_claimed(write, record, lambda: write.prepared(plan), write.start_over)
            crash_point("after-backend-write")
            settlement = await outcome_of(write, lambda: write.outcome(plan, reply))
            await record_outcome(write, record, settlement)
            await write.progress(DONE)
    error = settlement.error()
    if error is not None:
        raise error
    return {**settlement.result, "replayed": False}


async def send_claimed(
    call: AuditedCall, record: KeyRecord, prepare: Callable[[], Awaitable[Sender]], start_over: str | None = None
) -> Reply | None:
    """Steps 8 and 9 under a claimed key: ``prepare`` re-checks and builds the backend call, which is then sent
    once. Returns its reply, or LOST when it was sent and no answer came. Whatever goes wrong, the key ends
    released or settled: a failure before the call is sent releases it and refuses (backend_unavailable, the
    refusal itself, or internal_error naming ``start_over``); one after it counts as LOST (outcome unknown)."""
    sent = False
    try:
        send = await prepare()
        await call.progress(CALLING)
        sent = True  # from here on the backend may have received the write
        return await send()
    except OutcomeLost:
        return LOST
    except BackendUnavailable:
        await _release(call, record)
        backend = call.gw.config.backend_of(call.name)
        raise unreachable(backend, "Nothing was sent. Retry with the same idempotencyKey.") from None
    except Exception as exc:
        if sent:
            log.exception("%s failed after the backend call: %s", call.name, type(exc).__name__)
            return LOST
        await _release(call, record)
        if isinstance(exc, ToolError):
            raise
        log.exception("%s failed before the backend call: %s", call.name, type(exc).__name__)
        message = NOTHING_SENT.format(start_over or "the tool")
        raise ToolError(Code.INTERNAL_ERROR, message, next_tool=start_over) from None


async def outcome_of(call: AuditedCall, decide: Callable[[], Awaitable[Settlement]]) -> Settlement:
    """Step 9's decision about a sent write; one that cannot be made (a failing re-read, an answer that breaks
    the decision) is unknown."""
    try:
        return await decide()
    except Exception as exc:
        log.exception("%s could not read the outcome of a sent write: %s", call.name, type(exc).__name__)
        return Settlement("unknown", outcome_unknown_body(None))


async def _release(call: AuditedCall, record: KeyRecord) -> None:
    """Free a key whose write was never sent. A store that fails here leaves it in flight, which reads as
    outcome_unknown later: never a second write."""
    try:
        await call.gw.store.release(record)
    except StoreUnavailable:
        raise
    except Exception as exc:
        log.error("key %s could not be released: %s", record.key, type(exc).__name__)


async def record_outcome(call: AuditedCall, record: KeyRecord, settlement: Settlement) -> None:
    """Settle the key together with the outcome's audit entry: one transaction where the store has one (a crash
    keeps both or neither), the entry first where it has not (Redis). A crash before leaves the key in flight
    with no entry, and the next ``serve`` adds an outcome_unknown entry for it (gateway.audit.trail.recover), so
    no write that reached the backend goes unaudited. A failing store cannot turn the outcome into an error:
    what it could not take is kept (gateway.write.unsettled) and stored by the next write call that finds the
    store working."""
    error = settlement.error()
    next_key_state(record.state, settlement.state)  # raises if the table in gateway.records forbids it
    settled = replace(record, state=settlement.state, result=settlement.result)
    entry = call.seal(_outcome(error))
    await call.gw.unsettled.put(call.gw.store, settled, entry)


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
