"""A write tool: the steps of gateway.tools.write_rules in order, with the I/O each one needs.

    run_write   steps 1-2 (admit), then decide, then one audit entry for the decision
    _decide     3 key lookup -> 4 plan -> 5 can ask -> 6 target unchanged -> 7 ask -> _write
    _write      8 lock, claim -> _send (re-check, 9 backend call, settle) -> _record (audit first, then the key)

Once the key is claimed, the rest runs shielded from cancellation, so a caller that hangs up mid-write
cannot leave the key in flight: the backend call (bounded by its timeout) and the record always finish.
Nor can an exception: one before the backend call releases the key, one after it settles the key with the
write's outcome (unknown when that cannot be told), and a store that cannot take the outcome has it kept
(gateway.stores.unsettled) while the caller is told the truth.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any

import anyio
import mcp_types as types
from mcp.server import ServerRequestContext

from gateway.approvals.policy import Choice, from_plan, public_mode, scopes_for
from gateway.approvals.rules import approved_by
from gateway.audit import trail
from gateway.backend import BackendUnavailable, OutcomeLost
from gateway.chaos import crash_point
from gateway.config import PreviewTool, WriteTool
from gateway.errors import Code, StoreUnavailable, ToolError
from gateway.identity import current_person
from gateway.records import Approval, AuditEntry, KeyRecord, Plan, Reply
from gateway.runtime import Gateway
from gateway.templates import MISSING
from gateway.tools import approval, confirm
from gateway.tools.write_rules import (
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
class WriteCall:
    """One call of a write tool: who, which tool, and the audit entry its decision will leave."""

    gw: Gateway
    name: str
    config: WriteTool
    preview: PreviewTool
    caller: str
    entry: AuditEntry = field(init=False)
    audited: bool = False

    def __post_init__(self) -> None:
        self.entry = AuditEntry(at=0.0, caller=self.caller, tool=self.name, outcome="")

    def note(self, **facts: Any) -> None:
        """Add facts learnt along the way (target, versions, the user's answer) to the coming audit entry."""
        self.entry = replace(self.entry, **facts)

    def decided(self, outcome: str, code: Code | None) -> AuditEntry | None:
        """The audit entry of this call's decision, once (None after); the user's answer, if any, is counted."""
        if self.audited:
            return None
        self.audited = True
        if self.entry.confirmation is not None:
            self.gw.metrics.answers.labels(self.entry.confirmation).inc()
        code_text = None if code is None else code.value
        return replace(self.entry, at=self.gw.clock(), outcome=outcome, code=code_text)

    async def audit(self, outcome: str, code: Code | None) -> None:
        """One audit entry per decision. A store that fails to take it is logged: the caller still gets the answer."""
        entry = self.decided(outcome, code)
        if entry is None:
            return
        try:
            await trail.append(self.gw.store, entry)
        except Exception as exc:
            log.error("audit entry not stored (%s): %s", type(exc).__name__, entry)

    async def current(self, target_id: str) -> dict[str, Any] | None:
        """The target as it reads now, or None."""
        return await self.gw.reader.find(self.preview.target, target_id)

    async def require_unchanged(self, plan: Plan) -> None:
        """Read the target and the plan's lookups afresh; refuse if anything planned moved or it became protected."""
        target = self.preview.target
        state = await self.gw.reader.get(target, plan.target)
        tables = await self.gw.reader.fresh_lookups(self.preview.lookups_used, self.gw.config.lookups)
        seen = Seen(
            target_id=target.id_in(state),
            version=target.version_in(state),
            protected=target.is_protected(plan.target, state),
            summary=self.preview.summary_of(plan.arguments, state, tables),
        )
        require_unchanged(plan, seen, self.config.preview)

    async def fits(self) -> Fits:
        """Whether a value may fill a field of this tool's output."""
        return (await self.gw.catalog())[self.name].fits


async def run_write(
    call: WriteCall,
    ctx: ServerRequestContext[Any, Any],
    params: types.CallToolRequestParams,
    admit: Callable[[], Awaitable[dict[str, Any]]],
) -> dict[str, Any] | types.InputRequiredResult:
    """Run the write path; exactly one audit entry per decision, none for an InputRequiredResult round."""
    raw = params.arguments or {}
    call.note(plan_id=_short_text(raw.get("planId")), idempotency_key=_short_text(raw.get("idempotencyKey")))
    try:
        try:
            outcome = await _decide(call, ctx, params, await admit())
        except StoreUnavailable:  # raised only before the backend call: settle's is handled in _record
            raise ToolError(Code.BACKEND_UNAVAILABLE, STORE_DOWN) from None
    except ToolError as err:
        await call.audit(AUDIT_OUTCOMES.get(err.code, "refused"), err.code)
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
    gw, preview_name = call.gw, call.config.preview
    plan_id, key = args["planId"], args["idempotencyKey"]
    await gw.unsettled.retry(gw.store)
    record = gw.unsettled.record(call.caller, key) or await gw.store.get_record(call.caller, key)
    verdict = after_key_lookup(record, plan_id)
    if record is not None:
        call.note(target=record.target)
        if verdict is AfterLookup.REPLAY:
            call.note(version_after=(record.result or {}).get("version"))
            return {**(record.result or {}), "replayed": True}
        raise ToolError(**outcome_unknown_body(await call.current(record.target)))
    plan = live_plan(await gw.store.get_plan(plan_id, gw.clock()), call.caller, call.name, preview_name)
    call.note(target=plan.target, version_before=plan.version)
    message = question_text(call.preview.message, plan, call.preview.target.noun)
    choice = from_plan(plan.approval, call.config)
    decided_by = {"mode": public_mode(choice.mode), **({"rule": choice.rule} if choice.rule else {})}
    if choice.mode == "url":
        await call.require_unchanged(plan)
        request = _approval_request(call, plan, key, message, choice)
        approved = await approval.approve(ctx, params, request, gw.store, gw.clock)
        if isinstance(approved, types.InputRequiredResult):
            return approved
        call.note(confirmation="approved", extra={**decided_by, "approvers": approved_by(approved)})
    else:
        require_form(ctx.session.client_capabilities)
        await call.require_unchanged(plan)
        question = confirm.Question(
            message=message,
            schema=confirmation_schema(choice.mode, plan),
            caller=call.caller,
            plan_id=plan_id,
            key=key,
            timeout=call.config.prompt_timeout_seconds,
        )
        answer = await confirm.ask(ctx, params, question, gw.store, gw.clock())
        if isinstance(answer, types.InputRequiredResult):
            return answer
        call.note(confirmation=answer.action if answer is not None else "timeout", extra=decided_by)
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
    return await _write(call, plan, record)


def _approval_request(call: WriteCall, plan: Plan, key: str, message: str, choice: Choice) -> approval.Request:
    """What a url-mode write asks the approval page for."""
    return approval.Request(
        plan=plan,
        caller_person=current_person(),
        key=key,
        message=message,
        page_url=call.gw.approvals_url,
        approvers=choice.approvers,
        four_eyes=choice.four_eyes,
        rule=choice.rule,
        announce=_announcer(call, choice),
        timeout=call.config.prompt_timeout_seconds,
    )


def _announcer(call: WriteCall, choice: Choice) -> Callable[[Approval, str], None] | None:
    """Where a new approval is announced: the rule's webhook, if it names one."""
    notifier, webhook = call.gw.notifier, choice.notify
    if notifier is None or webhook is None:
        return None
    return lambda approval, url: notifier.notify(webhook, approval, url, choice.rule)


async def _write(call: WriteCall, plan: Plan, record: KeyRecord) -> dict[str, Any]:
    gw = call.gw
    async with gw.store.lock(plan.target):
        crash_point("before-claim")
        claim = await gw.store.claim(record, gw.clock(), call.config.idempotency_retention_seconds)
        if not claim.claimed:
            return await _not_claimed(call, claim.existing, plan, record)
        with anyio.CancelScope(shield=True):
            crash_point("after-claim")
            settlement = await _send(call, plan, record)
            await _record(call, record, settlement)
            if settlement.state in ("applied", "unknown"):  # may have changed the target: counts for budgets
                await _count(call)
    error = settlement.error()
    if error is not None:
        raise error
    return {**settlement.result, "replayed": False}


async def _send(call: WriteCall, plan: Plan, record: KeyRecord) -> Settlement:
    """Steps 8 (re-check) and 9 under a claimed key. Whatever goes wrong, the key ends settled or released: a
    failure before the backend call releases it (and refuses), one after it settles it as the write's outcome,
    unknown when that cannot be told."""
    gw, write = call.gw, call.config
    sent = False
    try:
        await call.require_unchanged(plan)
        payload = write.call.payload_for(template_names(plan, call.preview.target.noun))
        sent = True  # from here on the backend may have received the write
        reply: Reply | None = await gw.backend.call(write.call.action, payload, write.call.timeout_seconds)
    except OutcomeLost:
        reply = LOST
    except BackendUnavailable:
        await _release(call, record)
        raise ToolError(
            Code.BACKEND_UNAVAILABLE,
            "The legacy backend cannot be reached; nothing was sent. Retry with the same idempotencyKey.",
        ) from None
    except ToolError:
        await _release(call, record)
        raise
    except Exception as exc:
        log.error("%s failed %s the backend call: %s", call.name, "after" if sent else "before", type(exc).__name__)
        if sent:
            reply = LOST
        else:
            await _release(call, record)
            preview = call.config.preview
            raise ToolError(Code.INTERNAL_ERROR, NOTHING_SENT.format(preview), next_tool=preview) from None
    crash_point("after-backend-write")
    try:
        fits = await call.fits()
        current = await call.current(plan.target) if needs_reread(reply, write, fits) else None
        reread_version = call.preview.target.version_in(current) if current is not None else MISSING
        return settle(plan, reply, current, reread_version, write, write.preview, fits)
    except Exception as exc:  # a decision that cannot be made about a sent write: its outcome is unknown
        log.error("%s could not read the outcome of a sent write: %s", call.name, type(exc).__name__)
        return Settlement("unknown", outcome_unknown_body(None))


async def _release(call: WriteCall, record: KeyRecord) -> None:
    """Free a key whose write was never sent. A store that fails here leaves it in flight, which reads as
    outcome_unknown later: never a second write."""
    try:
        await call.gw.store.release(record)
    except StoreUnavailable:
        raise
    except Exception as exc:
        log.error("key %s could not be released: %s", record.key, type(exc).__name__)


async def _record(call: WriteCall, record: KeyRecord, settlement: Settlement) -> None:
    """Audit the outcome, then settle the key. The entry goes first: a crash in between leaves the key in flight,
    and the next ``serve`` adds an outcome_unknown entry for it (gateway.audit.trail.recover), so no write that
    reached the backend goes unaudited. Neither step can turn the outcome into an error: what the store could
    not take is kept (gateway.stores.unsettled) and stored by the next write call that finds the store working."""
    error = settlement.error()
    if error is None:
        call.note(version_after=settlement.result["version"])
    outcome = "applied" if error is None else AUDIT_OUTCOMES.get(error.code, "refused")
    next_key_state(record.state, settlement.state)  # raises if the table in write_rules forbids it
    settled = replace(record, state=settlement.state, result=settlement.result)
    await call.gw.unsettled.put(call.gw.store, call.decided(outcome, None if error is None else error.code), settled)


async def _count(call: WriteCall) -> None:
    """Count a write that may have happened, for the approval rules' blast-radius budgets."""
    scopes = list(scopes_for(call.caller, call.name).values())
    try:
        await call.gw.store.count_write(scopes, call.gw.clock())
    except Exception as exc:  # the write is recorded already: a failing count must not turn it into an error
        log.error("write of key %s not counted for budgets (%s)", call.entry.idempotency_key, type(exc).__name__)


async def _not_claimed(call: WriteCall, existing: KeyRecord | None, plan: Plan, record: KeyRecord) -> dict[str, Any]:
    """Another call got there first: replay its outcome, or say why this one cannot proceed."""
    if existing is not None:
        if after_key_lookup(existing, record.plan_id) is AfterLookup.REPLAY:
            return {**(existing.result or {}), "replayed": True}
        raise ToolError(**outcome_unknown_body(await call.current(plan.target)))
    live_plan(await call.gw.store.get_plan(plan.plan_id, call.gw.clock()), call.caller, call.name, call.config.preview)
    raise ToolError(Code.REQUEST_IN_PROGRESS, "Another call is applying this plan right now. Retry in a few seconds.")


def _short_text(value: Any) -> str | None:
    return value[:128] if isinstance(value, str) else None
