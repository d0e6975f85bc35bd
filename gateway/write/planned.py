"""A write tool: the steps of gateway.write.steps in order, with the I/O each one needs.

    run_write   steps 1-2 (admit), then decide, then one audit entry for the decision
    _decide     3 key lookup -> 4 plan -> 4b rules rechecked (_tightened) -> 5 can ask -> 6 target unchanged
                -> 7 ask -> _write
    _write      8 lock, rules rechecked for a deny, claim -> _send (re-check, 9 backend call) -> _record (the key
                settled with its entry)

A key found claimed at any point (at step 3, after a refusal of steps 4-7, or at the claim) answers as the key
(its replay, ``request_in_progress`` or ``outcome_unknown``), never with a plan refusal: a concurrent call with
the same key may have written already, and ``plan_stale`` would invite a preview and a second write.

``run_decision`` (admit, decide, audit once), ``send_claimed`` (step 9's call) and ``record_outcome`` (settle the
key with its audit entry) are shared with the other tools that write: a confirmed pass-through tool
(gateway.tools.passthrough) brings its own ``decide`` and an ``AuditedCall`` of its own.

Once the key is claimed, the rest runs shielded from cancellation, so a caller that hangs up mid-write
cannot leave the key in flight: the backend call (bounded by its timeout) and the record always finish.
Nor can an exception: one before the backend call releases the key, one after it settles the key with the
write's outcome (unknown when that cannot be told), and a store that cannot take the outcome has it kept
(gateway.write.outcome) while the caller is told the truth.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

import anyio
import mcp_types as types
from mcp.server import ServerRequestContext

from gateway.approvals.lifecycle import approved_by
from gateway.approvals.policy import (
    Choice,
    decided_by,
    denial,
    facts,
    from_plan,
    rechecked,
    scopes_for,
    tightened,
    without_own_plan,
)
from gateway.audit import trail
from gateway.audit.floods import is_flood_candidate
from gateway.backend import BackendUnavailable, OutcomeLost
from gateway.catalog.published import IDEMPOTENCY_KEY as KEY
from gateway.catalog.published import PLAN_ID
from gateway.config import PreviewTool, WriteTool
from gateway.config.expressions import MISSING
from gateway.crashpoints import crash_point
from gateway.errors import Code, StoreUnavailable, ToolError
from gateway.identity.caller import caller_facts, current_person
from gateway.records import Approval, AuditEntry, KeyRecord, Plan, Reply
from gateway.text import printable
from gateway.write.ask import form, page
from gateway.write.parts import Parts
from gateway.write.progress import ASKING, CALLING, DONE, Reporter, silent
from gateway.write.steps import (
    LOST,
    AfterLookup,
    Fits,
    Seen,
    Settlement,
    after_key_lookup,
    confirmation_schema,
    live_plan,
    needs_reread,
    next_key_state,
    outcome_unknown_body,
    question_text,
    require_form,
    require_unchanged,
    require_yes,
    settle,
    template_names,
    uses_up_plan,
)

AUDIT_OUTCOMES = {Code.OUTCOME_UNKNOWN: "unknown", Code.BACKEND_ERROR: "backend_error"}
STORE_DOWN = "The gateway's state store cannot be reached; nothing was sent. Retry with the same idempotencyKey."
NOTHING_SENT = "The gateway failed before sending the write; nothing was changed. Call {} again, or retry later."

log = logging.getLogger(__name__)


@dataclass
class AuditedCall:
    """One call of a tool that writes: who, which tool, and the audit entry its decision will leave."""

    gw: Parts
    name: str
    caller: str
    progress: Reporter = silent
    entry: AuditEntry = field(init=False)
    audited: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        self.entry = AuditEntry(at=0.0, caller=self.caller, tool=self.name, outcome="")

    def note(self, **facts: Any) -> None:
        """Add facts learnt along the way (target, versions, the user's answer) to the coming audit entry."""
        self.entry = replace(self.entry, **facts)

    async def audit(self, outcome: str, code: str | None) -> None:
        """One audit entry per decision, stored on its own (a write's outcome is stored with its key instead);
        a refusal that never reached a plan is counted, and stored only as the first of its minute
        (gateway.audit.floods). ``code`` is the code as the caller saw it (``ToolError.wire_code``). A store that
        fails to take it is logged: the caller still gets the answer."""
        if self.audited:
            return
        entry = self.decision(outcome, code)
        store, refusals = self.gw.store, self.gw.refusals
        try:
            for report in refusals.due(entry.at):
                await trail.append(store, report)
            if is_flood_candidate(entry):
                self.gw.metrics.refusals_before_plan.labels(self.name, entry.code).inc()
                if not refusals.admit(entry):
                    return
            await trail.append(store, entry)
        except Exception as exc:
            log.error("audit entry not stored (%s): %s", type(exc).__name__, entry)

    def decision(self, outcome: str, code: str | None) -> AuditEntry:
        """The entry of this call's one decision; the user's answer, if there was a prompt, is counted too."""
        self.audited = True
        if self.entry.confirmation is not None:
            self.gw.metrics.answers.labels(self.entry.confirmation).inc()
        return replace(self.entry, at=self.gw.clock(), outcome=outcome, code=code)


@dataclass
class WriteCall(AuditedCall):
    """One call of a planned write tool, with the preview that issued its plan."""

    config: WriteTool = field(kw_only=True)
    preview: PreviewTool = field(kw_only=True)

    async def current(self, target_id: str) -> dict[str, Any] | None:
        """The target as it reads now, or None."""
        return await self.gw.reader_for(self.name).find(self.preview.target, target_id)

    async def require_unchanged(self, plan: Plan) -> None:
        """Read the target and the plan's lookups afresh; refuse if anything planned moved or it became protected."""
        target = self.preview.target
        reader = self.gw.reader_for(self.name)
        state = await reader.get(target, plan.target)
        tables = {name: await self.gw.fresh_lookup(name) for name in self.preview.lookups_used}
        seen = Seen(
            target_id=target.id_in(state),
            version=target.version_in(state),
            protected=target.is_protected(plan.target, state),
            summary=self.preview.summary_of(plan.arguments, state, tables),
        )
        require_unchanged(plan, seen, self.config.preview, target.noun)

    async def prepared(self, plan: Plan) -> Sender:
        """Step 8 under the claimed key: the target re-checked and the backend call built, nothing sent yet."""
        await self.require_unchanged(plan)
        write, backend = self.config, self.gw.backend_for(self.name)
        payload = write.call.payload_for(template_names(plan, self.preview.target.noun))
        return lambda: backend.call(write.call.action, payload, write.call.timeout_seconds)

    async def outcome(self, plan: Plan, reply: Reply | None) -> Settlement:
        """Step 9's decision about a sent write, re-reading the target when the answer does not tell."""
        write = self.config
        fits = await self.fits()
        current = await self.current(plan.target) if needs_reread(reply, write, fits) else None
        reread_version = self.preview.target.version_in(current) if current is not None else MISSING
        return settle(plan, reply, current, reread_version, write, write.preview, fits)

    async def fits(self) -> Fits:
        """Whether a value may fill a field of this tool's output (the version under its published name)."""
        published, version = (await self.gw.catalog())[self.name], self.preview.target.version_output
        return lambda name, value: published.fits(version if name == "version" else name, value)


Answer = dict[str, Any] | types.InputRequiredResult
C = TypeVar("C", bound=AuditedCall)
Sender = Callable[[], Awaitable[Reply]]


async def run_write(
    call: WriteCall,
    ctx: ServerRequestContext[Any, Any],
    params: types.CallToolRequestParams,
    admit: Callable[[], Awaitable[dict[str, Any]]],
) -> Answer:
    """Run the write path; exactly one audit entry per decision, none for an InputRequiredResult round."""
    return await run_decision(call, ctx, params, admit, _decide)


async def run_decision(
    call: C,
    ctx: ServerRequestContext[Any, Any],
    params: types.CallToolRequestParams,
    admit: Callable[[], Awaitable[dict[str, Any]]],
    decide: Callable[
        [C, ServerRequestContext[Any, Any], types.CallToolRequestParams, dict[str, Any]], Awaitable[Answer]
    ],
) -> Answer:
    """Admit the call, let ``decide`` run it, and leave exactly one audit entry for its decision (none for an
    InputRequiredResult round). A refusal is audited with the code the caller sees."""
    call.note(**audited_arguments(params.arguments or {}))
    try:
        try:
            outcome = await decide(call, ctx, params, await admit())
        except StoreUnavailable:  # raised only before the backend call: settle's is handled in record_outcome
            raise ToolError(Code.BACKEND_UNAVAILABLE, STORE_DOWN) from None
    except ToolError as err:
        await call.audit(AUDIT_OUTCOMES.get(err.code, "refused"), err.wire_code)
        raise
    if isinstance(outcome, types.InputRequiredResult):
        return outcome
    await call.audit("replayed" if outcome["replayed"] else "applied", None)
    return outcome


async def _decide(
    call: WriteCall,
    ctx: ServerRequestContext[Any, Any],
    params: types.CallToolRequestParams,
    args: dict[str, Any],
) -> dict[str, Any] | types.InputRequiredResult:
    gw, plan_id, key = call.gw, args["planId"], args["idempotencyKey"]
    await gw.unsettled.retry(gw.store)
    record = await _key_record(call, key)
    if record is not None:
        return await _by_key(call, record, plan_id)
    try:
        confirmed = await _confirmed(call, ctx, params, plan_id, key)
    except ToolError as refusal:
        # Another call with this key may have claimed it meanwhile (and changed the target, so this one's
        # plan reads stale): its key then answers, never a plan refusal that would invite a second write.
        claimed = await _key_record(call, key)
        if claimed is None:
            raise
        log.info("key claimed by another call while this one was refused (%s); answering by key", refusal.code)
        return await _by_key(call, claimed, plan_id)
    if isinstance(confirmed, types.InputRequiredResult):
        return confirmed
    return await _write(call, *confirmed)


async def _key_record(call: WriteCall, key: str) -> KeyRecord | None:
    """Step 3's lookup: the key's record, kept in the process (an outcome the store could not take) or stored."""
    return call.gw.unsettled.record(call.caller, key) or await call.gw.store.get_record(call.caller, key)


async def _by_key(call: WriteCall, record: KeyRecord, plan_id: str) -> dict[str, Any]:
    """The answer of a key that is already claimed: its replay, or why it cannot be (in progress, unknown)."""
    verdict = after_key_lookup(record, plan_id)
    call.note(target=record.target)
    if verdict is AfterLookup.REPLAY:
        call.note(version_after=(record.result or {}).get("version"))
        return {**(record.result or {}), "replayed": True}
    raise ToolError(**outcome_unknown_body(await call.current(record.target)))


async def _confirmed(
    call: WriteCall,
    ctx: ServerRequestContext[Any, Any],
    params: types.CallToolRequestParams,
    plan_id: str,
    key: str,
) -> tuple[Plan, KeyRecord, Choice] | types.InputRequiredResult:
    """Steps 4-7: the live plan, its mode (tightened), the target unchanged, the yes; the record to claim."""
    gw, preview_name = call.gw, call.config.preview
    plan = live_plan(await gw.store.get_plan(plan_id, gw.clock()), call.caller, call.name, preview_name)
    call.note(target=plan.target, version_before=plan.version)
    message = question_text(call.preview.message, plan, call.preview.target.noun)
    choice = await _tightened(call, plan, from_plan(plan.approval, call.config))
    decided = decided_by(choice)
    if choice.mode == "url":
        await call.require_unchanged(plan)
        request = _approval_request(call, plan, key, message, choice)
        await call.progress(ASKING)
        approved = await page.approve(ctx, params, request, gw)
        if isinstance(approved, types.InputRequiredResult):
            return approved
        call.note(confirmation="approved", extra={**decided, "approvers": approved_by(approved)})
    else:
        require_form(ctx.session.client_capabilities)
        await call.require_unchanged(plan)
        question = form.Question(
            message=message,
            schema=confirmation_schema(choice.mode, plan),
            caller=call.caller,
            plan_id=plan_id,
            key=key,
            timeout=call.config.prompt_timeout_seconds,
        )
        await call.progress(ASKING)
        answer = await form.ask(ctx, params, question, gw.store, gw.clock())
        if isinstance(answer, types.InputRequiredResult):
            return answer
        call.note(confirmation=answer.action if answer is not None else "timeout", extra=decided)
        if uses_up_plan(answer):
            await gw.store.consume_plan(plan_id)
        require_yes(answer, choice.mode, plan, preview_name)
    record = KeyRecord(
        call.caller,
        key,
        plan_id=plan_id,
        target=plan.target,
        state="in_flight",
        tool=call.name,
        version_before=plan.version,
    )
    return plan, record, choice


async def _tightened(call: WriteCall, plan: Plan, choice: Choice) -> Choice:
    """Step 4b: the rules that read the write counters (or are marked ``recheck``) decide again, now; the
    stricter of that and the plan's choice wins, and a ``deny`` refuses (gateway.approvals.policy)."""
    if not rechecked(call.config):
        return choice
    gw, now = call.gw, call.gw.clock()
    scopes = scopes_for(call.caller, call.name)
    counted = await gw.store.recent_writes(list(scopes.values()), now)
    issued_ago = now - (plan.expires_at - call.preview.plan_ttl_seconds)
    writes = without_own_plan({name: counted[scope] for name, scope in scopes.items()}, issued_ago)
    state = await call.current(plan.target) or {}
    caller = caller_facts(gw.config, gw.config.gateway.stdio_caller)
    seen = facts(caller, call.name, plan.target, state, plan.summary, plan.arguments, writes)
    now_choice = tightened(choice, call.config, seen)
    if now_choice.mode == "deny":
        call.note(extra=decided_by(now_choice))
        raise denial(now_choice, "now (its counters moved since the preview)")
    return now_choice


def _approval_request(call: WriteCall, plan: Plan, key: str, message: str, choice: Choice) -> page.Request:
    """What a url-mode write asks the approval page for."""
    return page.Request(
        plan=plan,
        caller_person=current_person(),
        key=key,
        message=message,
        page_url=call.gw.approvals_url,
        approvers=choice.approvers,
        four_eyes=choice.four_eyes,
        rule=choice.rule,
        max_pending=call.gw.config.approvals.max_pending_per_caller,
        announce=_announcer(call, choice),
        timeout=call.config.prompt_timeout_seconds,
    )


def _announcer(call: WriteCall, choice: Choice) -> Callable[[Approval, str], None] | None:
    """Where a new approval is announced: the rule's webhook, if it names one."""
    notifier, webhook = call.gw.notifier, choice.notify
    if notifier is None or webhook is None:
        return None
    return lambda approval, url: notifier.notify(webhook, approval, url, choice.rule)


async def _write(call: WriteCall, plan: Plan, record: KeyRecord, choice: Choice) -> dict[str, Any]:
    gw = call.gw
    async with gw.store.lock(plan.target):
        await _tightened(call, plan, choice)  # once more under the lock: a deny that a race made true refuses here
        crash_point("before-claim")
        claim = await gw.store.claim(record, gw.clock(), call.config.idempotency_retention_seconds)
        if not claim.claimed:
            return await _not_claimed(call, claim.existing, plan, record)
        with anyio.CancelScope(shield=True):
            crash_point("after-claim")
            reply = await send_claimed(call, record, lambda: call.prepared(plan), start_over=call.config.preview)
            crash_point("after-backend-write")
            settlement = await outcome_of(call, lambda: call.outcome(plan, reply))
            if settlement.error() is None:
                call.note(version_after=settlement.result["version"])
            await record_outcome(call, record, settlement)
            await call.progress(DONE)
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
        raise ToolError(
            Code.BACKEND_UNAVAILABLE,
            "The legacy backend cannot be reached; nothing was sent. Retry with the same idempotencyKey.",
        ) from None
    except Exception as exc:
        if sent:
            log.error("%s failed after the backend call: %s", call.name, type(exc).__name__)
            return LOST
        await _release(call, record)
        if isinstance(exc, ToolError):
            raise
        log.error("%s failed before the backend call: %s", call.name, type(exc).__name__)
        message = NOTHING_SENT.format(start_over or "the tool")
        raise ToolError(Code.INTERNAL_ERROR, message, next_tool=start_over) from None


async def outcome_of(call: AuditedCall, decide: Callable[[], Awaitable[Settlement]]) -> Settlement:
    """Step 9's decision about a sent write; one that cannot be made (a failing re-read, an answer that breaks
    the decision) is unknown."""
    try:
        return await decide()
    except Exception as exc:
        log.error("%s could not read the outcome of a sent write: %s", call.name, type(exc).__name__)
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
    what it could not take is kept (gateway.write.outcome) and stored by the next write call that finds the
    store working."""
    error = settlement.error()
    outcome = "applied" if error is None else AUDIT_OUTCOMES.get(error.code, "refused")
    next_key_state(record.state, settlement.state)  # raises if the table in write_rules forbids it
    settled = replace(record, state=settlement.state, result=settlement.result)
    await call.gw.unsettled.put(
        call.gw.store, settled, call.decision(outcome, None if error is None else error.wire_code)
    )


async def _not_claimed(call: WriteCall, existing: KeyRecord | None, plan: Plan, record: KeyRecord) -> dict[str, Any]:
    """Another call got there first: replay its outcome, or say why this one cannot proceed."""
    if existing is not None:
        return await _by_key(call, existing, record.plan_id)
    live_plan(await call.gw.store.get_plan(plan.plan_id, call.gw.clock()), call.caller, call.name, call.config.preview)
    raise ToolError(Code.REQUEST_IN_PROGRESS, "Another call is applying this plan right now. Retry in a few seconds.")


def audited_arguments(raw: dict[str, Any]) -> dict[str, Any]:
    """The plan id and key for the audit entry, known before the arguments are validated: each as sent when it
    fits its schema pattern, else left out and flagged in ``extra.invalid``, escaped (gateway.text), so a
    refused call cannot put control or bidi characters into the trail an operator reads."""
    facts: dict[str, Any] = {}
    invalid: dict[str, str] = {}
    for name, field_name, schema in (("planId", "plan_id", PLAN_ID), ("idempotencyKey", "idempotency_key", KEY)):
        value = raw.get(name)
        if isinstance(value, str) and re.fullmatch(schema["pattern"], value):
            facts[field_name] = value
        elif value is not None:
            invalid[name] = printable(value[:128]) if isinstance(value, str) else f"({type(value).__name__})"
    if invalid:
        facts["extra"] = {"invalid": invalid}
    return facts
