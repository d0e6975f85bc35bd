"""A planned write: the steps of gateway.write.steps in order, with the I/O each one needs.

    decide      the key first (gateway.write.driver.carry_out: 3 key lookup), then this write's own steps
                (``_confirmed``: 4 plan -> 4b rules rechecked -> 5 can ask -> 6 target unchanged -> 7 ask), then
                the driver's 8 lock, rules rechecked for a deny, claim, re-check 6 (``prepared``), 9 backend call
                and the outcome (``outcome``), the key settled with its entry
    WriteCall   the call itself: its audit entry, and the hooks the driver calls (read the target, build the
                backend call, decide the outcome)

A key found claimed at any point answers as the key (its replay, ``request_in_progress`` or ``outcome_unknown``),
never with a plan refusal: the driver looks it up before and after these steps, and at the claim.

Steps 1 and 2 (authorize, rate limit, size caps, schema) ran before, in the MCP surface's chain
(gateway.mcp.chain), as did the opening of the call's one audit entry (gateway.write.audited.decided).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import mcp_types as types
from mcp.server import ServerRequestContext

from gateway.approvals.policy import from_plan
from gateway.config import PreviewTool, WriteTool
from gateway.config.expressions import MISSING
from gateway.records import Plan, Reply
from gateway.write.ask.yes import ask
from gateway.write.audited import Answer, Interim
from gateway.write.driver import ClaimedWrite, Sender, carry_out
from gateway.write.steps import (
    Fits,
    Seen,
    Settlement,
    live_plan,
    needs_reread,
    question_text,
    require_unchanged,
    settle,
    template_names,
)


@dataclass
class WriteCall(ClaimedWrite[WriteTool]):
    """One call of a planned write tool, with the preview that issued its plan."""

    preview: PreviewTool = field(kw_only=True)
    reports_version: ClassVar[bool] = True

    @property
    def start_over(self) -> str:
        return self.config.preview

    async def current(self, target: str) -> dict[str, Any] | None:
        """The target as it reads now, or None."""
        return await self.gw.reader_for(self.name).find(self.preview.target, target)

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
        published, version = await self.gw.tool(self.name), self.preview.target.version_output
        return lambda name, value: published.fits(version if name == "version" else name, value)


async def decide(
    call: WriteCall,
    ctx: ServerRequestContext[Any, Any],
    params: types.CallToolRequestParams,
    args: dict[str, Any],
) -> Answer:
    """Steps 3 to 9 of an admitted call: its answer, or a request for input."""
    plan_id, key = args["planId"], args["idempotencyKey"]
    return await carry_out(call, key, plan_id, lambda: _confirmed(call, ctx, params, plan_id, key))


async def _confirmed(
    call: WriteCall,
    ctx: ServerRequestContext[Any, Any],
    params: types.CallToolRequestParams,
    plan_id: str,
    key: str,
) -> Plan | Interim:
    """Steps 4-7: the live plan, its mode (tightened), the target unchanged, the yes; the plan to claim."""
    gw, preview_name = call.gw, call.config.preview
    plan = live_plan(await gw.store.get_plan(plan_id, gw.clock()), call.caller, call.name, preview_name)
    call.note(target=plan.target, version_before=plan.version)
    message = question_text(call.preview.message, plan, call.preview.target.noun)
    # Step 4b: the plan was counted when it was issued, so the counters are read without it.
    call.counted_at = plan.expires_at - call.preview.plan_ttl_seconds
    choice = await call.tightened(plan, from_plan(plan.approval, call.config))
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
        policy=call.config.policy_of(choice.rule),
    )
    if asked is not None:
        return asked
    call.choice = choice
    return plan
