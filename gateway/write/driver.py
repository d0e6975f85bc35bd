"""What every write shares, in order: its key first, then the claim -> send -> settle skeleton.

    ClaimedWrite   a writing call (gateway.write.audited.AuditedCall) with its tool's config, the mode its rules
                   chose, and the few hooks a write fills in: ``start_over``, ``current`` (the target as it reads
                   now), ``prepared`` (the backend call, built under the claim), ``outcome`` (step 9's decision),
                   and ``before_claim`` where a write needs more in place for its claim
    carry_out      steps 3 to 9: the key first (kept outcomes stored, the key looked up: ``by_key``), the write's
                   own steps up to its yes, the key looked up again after a refusal, then ``apply_claimed``
    by_key         the answer of a key already used: its replay, or why it cannot be
    apply_claimed  steps 8 and 9: lock, the rules once more, claim key and plan, send once, settle with the entry
    record_outcome the key settled together with its audit entry

A planned write (gateway.write.planned) and a backend's own tool that writes (gateway.write.passthrough) each give
``carry_out`` their own steps up to the yes and fill in the hooks; the order of the steps, the key-first rule,
the crash points, the shield against cancellation and what an exception at each point does are written here once.

Once the key is claimed, the rest runs shielded from cancellation, so a caller that hangs up mid-write cannot
leave the key in flight: the backend call (bounded by its timeout) and the record always finish. Nor can an
exception: one before the backend call releases the key, one after it settles the key with the write's outcome
(unknown when that cannot be told), and a store that cannot take the outcome has it kept (gateway.write.unsettled)
while the caller is told the truth.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Generic, TypeVar

import anyio

from gateway.approvals import results
from gateway.approvals.policy import Choice
from gateway.audit import entries, trail
from gateway.backend import BackendUnavailable, OutcomeLost, unreachable
from gateway.config import ConfirmedTool
from gateway.crashpoints import crash_point
from gateway.errors import Code, StoreUnavailable, ToolError
from gateway.records import KeyRecord, Plan, Reply
from gateway.write.audited import Answer, AuditedCall, Interim, outcome_entry
from gateway.write.choice import tightened_now
from gateway.write.progress import CALLING, DONE
from gateway.write.steps import (
    LOST,
    AfterLookup,
    Settlement,
    after_key_lookup,
    next_key_state,
    outcome_unknown_body,
    plan_in_use,
)

NOTHING_SENT = "The gateway failed before sending the write; nothing was changed. Call {} again, or retry later."

Sender = Callable[[], Awaitable[Reply]]
ToolT = TypeVar("ToolT", bound=ConfirmedTool)

log = logging.getLogger(__name__)


@dataclass
class ClaimedWrite(AuditedCall, ABC, Generic[ToolT]):
    """A writing call that ``carry_out`` carries out: its tool's config, the mode its rules chose once asked (which
    the lock re-checks), and what is particular to it as a few hooks."""

    config: ToolT = field(kw_only=True)
    choice: Choice | None = field(default=None, kw_only=True)
    counted_at: float | None = field(default=None, kw_only=True)
    """When this write was counted in the budgets before its claim (a planned write: when its plan was issued),
    so the rules read the counters without it; None: it is counted at its claim."""
    reports_version: ClassVar[bool] = False
    """Whether its answer's ``version`` is the target's version after the write (audited as ``version_after``)."""

    @property
    @abstractmethod
    def start_over(self) -> str | None:
        """The tool that begins a new attempt (a preview), named when nothing was sent."""

    @abstractmethod
    async def current(self, target: str) -> dict[str, Any] | None:
        """The target as it reads now (None: gone, or a write with no target to read)."""

    async def before_claim(self, plan: Plan) -> None:
        """Under the target's lock, once the rules decided again and before the key is claimed: what else must be
        in place for the claim (may refuse). Nothing, unless a write says otherwise."""

    @abstractmethod
    async def prepared(self, plan: Plan) -> Sender:
        """Under the claimed key: re-check what must still hold and build the backend call, sending nothing."""

    @abstractmethod
    async def outcome(self, plan: Plan, reply: Reply | None) -> Settlement:
        """Step 9's decision about a sent write's reply (LOST when none came)."""

    def statement_facts(self, plan: Plan) -> dict[str, Any] | None:
        """What the rules read as ``statement`` (a statement tool's write); None for any other write."""
        return None

    async def tightened(self, plan: Plan, choice: Choice) -> Choice:
        """The rules that read the counters (or are marked ``recheck``) decide again, now, on the target as it
        reads now and without this write's own count; the stricter of that and ``choice`` wins, and a ``deny``
        refuses (gateway.write.choice)."""

        async def state() -> dict[str, Any]:
            return await self.current(plan.target) or {}

        issued_ago = None if self.counted_at is None else self.gw.clock() - self.counted_at
        return await tightened_now(
            self,
            self.config,
            choice,
            plan.target,
            state,
            plan.summary,
            plan.arguments,
            issued_ago,
            self.statement_facts(plan),
        )


async def carry_out(
    write: ClaimedWrite[Any], key: str, plan_id: str, confirm: Callable[[], Awaitable[Plan | Interim]]
) -> Answer:
    """Steps 3 to 9, the key first: what the store could not take yet is stored, then the key is looked up (a key
    already used answers as itself: ``by_key``). Only a free key goes on to the write's own steps up to its yes
    (``confirm``: the plan to claim, or an answer to give as it is), then steps 8 and 9 (``apply_claimed``).

    A key found claimed at any point (before the write's steps, after one of them refused, or at the claim)
    answers as the key, never with the refusal: a concurrent call with the same key may have written already,
    and ``plan_stale`` would invite a preview and a second write."""
    gw = write.gw
    await gw.unsettled.retry(gw.store)
    record = await _key_record(write, key)
    if record is not None:
        return await by_key(write, record, plan_id)
    try:
        confirmed = await confirm()
    except ToolError as refusal:
        claimed = await _key_record(write, key)
        if claimed is None:
            await results.refused(gw.store, plan_id, refusal, gw.clock(), past_approval=write.approved)
            raise
        log.info("key claimed by another call while this one was refused (%s); answering by key", refusal.code)
        return await by_key(write, claimed, plan_id)
    if not isinstance(confirmed, Plan):
        return confirmed
    claim = KeyRecord(
        write.caller,
        key,
        plan_id=confirmed.plan_id,
        target=confirmed.target,
        state="in_flight",
        tool=write.name,
        version_before=confirmed.version,
    )
    return await apply_claimed(write, confirmed, claim)


async def _key_record(write: ClaimedWrite[Any], key: str) -> KeyRecord | None:
    """Step 3's lookup: the key's record, kept in the process (an outcome the store could not take) or stored."""
    return write.gw.unsettled.record(write.caller, key) or await write.gw.store.get_record(write.caller, key)


async def by_key(write: ClaimedWrite[Any], record: KeyRecord, plan_id: str) -> dict[str, Any]:
    """The answer of a key already used: its replay, or why it cannot be (another plan, in progress, failed,
    unknown: then with the target as it reads now)."""
    verdict = after_key_lookup(record, plan_id)
    write.note(target=record.target)
    if verdict is AfterLookup.REPLAY:
        if write.reports_version:
            write.note(version_after=(record.result or {}).get("version"))
        return {**(record.result or {}), "replayed": True}
    raise ToolError(**outcome_unknown_body(await write.current(record.target)))


async def apply_claimed(write: ClaimedWrite[Any], plan: Plan, record: KeyRecord) -> dict[str, Any]:
    """Steps 8 and 9: under the target's lock, the rules once more (a deny a race made true refuses here), then
    the key and the plan claimed in one step, the write sent once, and the key settled with the call's audit
    entry. Returns the applied result; raises the settled refusal. For a write people approved, what became of it
    is also kept on its approval, for the page (approvals.results)."""
    if not write.approved:
        return await _apply(write, plan, record)
    gw = write.gw
    try:
        answer = await _apply(write, plan, record)
    except ToolError as refusal:
        await results.refused(gw.store, plan.plan_id, refusal, gw.clock(), past_approval=True)
        if refusal.code in (Code.OUTCOME_UNKNOWN, Code.BACKEND_ERROR):  # it was executed: say what was answered
            await trail.append(gw.store, entries.returned(write.facts, gw.clock(), refusal.wire_code))
        raise
    await results.applied(gw.store, plan.plan_id, answer, gw.clock())
    if not answer.get("replayed"):
        await trail.append(gw.store, entries.returned(write.facts, gw.clock(), None))
    return answer


async def _apply(write: ClaimedWrite[Any], plan: Plan, record: KeyRecord) -> dict[str, Any]:
    store, gw = write.gw.store, write.gw
    async with store.lock(plan.target):
        if write.choice is not None:
            await write.tightened(plan, write.choice)
        await write.before_claim(plan)
        crash_point("before-claim")
        claim = await store.claim(record, gw.clock(), write.config.idempotency_retention_seconds)
        if not claim.claimed:
            if claim.existing is not None:
                return await by_key(write, claim.existing, plan.plan_id)
            raise plan_in_use(
                await store.get_plan(plan.plan_id, gw.clock()), write.caller, write.name, write.start_over
            )
        with anyio.CancelScope(shield=True):
            crash_point("after-claim")
            reply = await _send(write, plan, record)
            crash_point("after-backend-write")
            settlement = await _outcome_of(write, plan, reply)
            if settlement.error() is None and write.reports_version:
                write.note(version_after=settlement.result["version"])
            await record_outcome(write, record, settlement)
            await write.progress(DONE)
    error = settlement.error()
    if error is not None:
        raise error
    return {**settlement.result, "replayed": False}


async def _send(write: ClaimedWrite[Any], plan: Plan, record: KeyRecord) -> Reply | None:
    """Steps 8 and 9 under a claimed key: the write re-checks and builds the backend call (``prepared``), which is
    then sent once. Returns its reply, or LOST when it was sent and no answer came. Whatever goes wrong, the key
    ends released or settled: a failure before the call is sent releases it and refuses (backend_unavailable, the
    refusal itself, or internal_error naming the tool to start over with); one after it counts as LOST (outcome
    unknown)."""
    sent = False
    try:
        send = await write.prepared(plan)
        await write.progress(CALLING)
        sent = True  # from here on the backend may have received the write
        return await send()
    except OutcomeLost:
        return LOST
    except BackendUnavailable:
        await _release(write, record)
        backend = write.gw.config.backend_of(write.name)
        raise unreachable(backend, "Nothing was sent. Retry with the same idempotencyKey.") from None
    except Exception as exc:
        if sent:
            log.exception("%s failed after the backend call: %s", write.name, type(exc).__name__)
            return LOST
        await _release(write, record)
        if isinstance(exc, ToolError):
            raise
        log.exception("%s failed before the backend call: %s", write.name, type(exc).__name__)
        message = NOTHING_SENT.format(write.start_over or "the tool")
        raise ToolError(Code.INTERNAL_ERROR, message, next_tool=write.start_over) from None


async def _outcome_of(write: ClaimedWrite[Any], plan: Plan, reply: Reply | None) -> Settlement:
    """Step 9's decision about a sent write (``outcome``); one that cannot be made (a failing re-read, an answer
    that breaks the decision) is unknown."""
    try:
        return await write.outcome(plan, reply)
    except Exception as exc:
        log.exception("%s could not read the outcome of a sent write: %s", write.name, type(exc).__name__)
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
    entry = call.seal(outcome_entry(error))
    await call.gw.unsettled.put(call.gw.store, settled, entry)
