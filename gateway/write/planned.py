"""A planned write: the steps of gateway.write.steps in order, with the I/O each one needs.

    decide      3 key lookup -> 4 plan -> 4b rules rechecked (_tightened) -> 5 can ask -> 6 target unchanged
                -> 7 ask -> gateway.write.driver.apply_claimed: 8 lock, rules rechecked for a deny, claim, re-check,
                9 backend call, the key settled with its entry
    WriteCall   the call itself: its audit entry and the hooks the driver's skeleton calls

A key found claimed at any point (at step 3, after a refusal of steps 4-7, or at the claim) answers as the key
(its replay, ``request_in_progress`` or ``outcome_unknown``), never with a plan refusal: a concurrent call with
the same key may have written already, and ``plan_stale`` would invite a preview and a second write.

Steps 1 and 2 (authorize, rate limit, size caps, schema) ran before, in the MCP surface's chain
(gateway.mcp.chain), as did the opening of the call's one audit entry (gateway.write.driver.decided).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types
from mcp.server import ServerRequestContext

from gateway.approvals import results
from gateway.approvals.policy import (
    Choice,
    from_plan,
)
from gateway.config import PreviewTool, WriteTool
from gateway.config.expressions import MISSING
from gateway.errors import Code, ToolError
from gateway.records import KeyRecord, Plan, Reply
from gateway.write.ask.yes import ask
from gateway.write.choice import tightened_now
from gateway.write.driver import Answer, ClaimedWrite, Interim, Sender, apply_claimed
from gateway.write.steps import (
    AfterLookup,
    Fits,
    Seen,
    Settlement,
    after_key_lookup,
    live_plan,
    needs_reread,
    outcome_unknown_body,
    question_text,
    require_unchanged,
    settle,
    template_names,
)

log = logging.getLogger(__name__)


@dataclass
class WriteCall(ClaimedWrite):
    """One call of a planned write tool, with the preview that issued its plan and, once asked, the rules'
    choice that the lock re-checks."""

    config: WriteTool = field(kw_only=True)
    preview: PreviewTool = field(kw_only=True)
    choice: Choice | None = field(default=None, kw_only=True)

    @property
    def retention_seconds(self) -> float:
        return self.config.idempotency_retention_seconds

    @property
    def start_over(self) -> str:
        return self.config.preview

    async def current(self, target_id: str) -> dict[str, Any] | None:
        """The target as it reads now, or None."""
        return await self.gw.reader_for(self.name).find(self.preview.target, target_id)

    async def require_unchanged(self, plan: Plan) -> Any:
        """Read the target and the plan's lookups afresh; refuse if anything planned moved or it became protected.
        The target as it reads now."""
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
        return state

    async def target_name(self, plan: Plan) -> str | None:
        """The target, read afresh and unchanged since the plan (else a refusal): its name as the backend reports
        it, for the approval page."""
        return self.preview.target.name_in(await self.require_unchanged(plan))

    async def before_claim(self, plan: Plan) -> None:
        """Under the lock, the rules once more: a deny that a race made true refuses here."""
        if self.choice is not None:
            await _tightened(self, plan, self.choice)

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
        settlement = settle(plan, reply, current, reread_version, write, write.preview, fits)
        if settlement.error() is None:
            self.note(version_after=settlement.result["version"])
        return settlement

    async def not_claimed(self, plan: Plan, record: KeyRecord, existing: KeyRecord | None) -> dict[str, Any]:
        """Another call got there first: replay its outcome, or say why this one cannot proceed."""
        if existing is not None:
            return await _by_key(self, existing, record.plan_id)
        live_plan(await self.gw.store.get_plan(plan.plan_id, self.gw.clock()), self.caller, self.name, self.start_over)
        raise ToolError(
            Code.REQUEST_IN_PROGRESS, "Another call is applying this plan right now. Retry in a few seconds."
        )

    async def fits(self) -> Fits:
        """Whether a value may fill a field of this tool's output (the version under its published name)."""
        published, version = await self.gw.tool(self.name), self.preview.target.version_output
        return lambda name, value: published.fits(version if name == "version" else name, value)


async def decide(
    call: WriteCall,
    ctx: ServerRequestContext[Any, Any],
    params: types.CallToolRequestParams,
    args: dict[str, Any],
) -> Answer:
    """Steps 3 to 9 of an admitted call: its answer, or a request for input."""
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
            await results.refused(gw.store, plan_id, refusal, gw.clock(), past_approval=call.approved)
            raise
        log.info("key claimed by another call while this one was refused (%s); answering by key", refusal.code)
        return await _by_key(call, claimed, plan_id)
    if not isinstance(confirmed, tuple):
        return confirmed
    plan, record = confirmed
    return await apply_claimed(call, plan, record)


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
) -> tuple[Plan, KeyRecord] | Interim:
    """Steps 4-7: the live plan, its mode (tightened), the target unchanged, the yes; the record to claim."""
    gw, preview_name = call.gw, call.config.preview
    plan = live_plan(await gw.store.get_plan(plan_id, gw.clock()), call.caller, call.name, preview_name)
    call.note(target=plan.target, version_before=plan.version)
    message = question_text(call.preview.message, plan, call.preview.target.noun)
    choice = await _tightened(call, plan, from_plan(plan.approval, call.config))
    asked = await ask(
        call,
        ctx,
        params,
        plan,
        key,
        message,
        choice,
        call.config.prompt_timeout_seconds,
        ready=lambda: call.target_name(plan),
        start_over=preview_name,
    )
    if asked is not None:
        return asked
    call.choice = choice
    record = KeyRecord(
        call.caller,
        key,
        plan_id=plan_id,
        target=plan.target,
        state="in_flight",
        tool=call.name,
        version_before=plan.version,
    )
    return plan, record


async def _tightened(call: WriteCall, plan: Plan, choice: Choice) -> Choice:
    """Step 4b: the rules that read the write counters (or are marked ``recheck``) decide again, now, without the
    write's own plan; the stricter of that and the plan's choice wins, and a ``deny`` refuses
    (gateway.write.choice)."""
    issued_ago = call.gw.clock() - (plan.expires_at - call.preview.plan_ttl_seconds)

    async def state() -> dict[str, Any]:
        return await call.current(plan.target) or {}

    return await tightened_now(call, call.config, choice, plan.target, state, plan.summary, plan.arguments, issued_ago)
