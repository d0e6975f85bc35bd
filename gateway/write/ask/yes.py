"""Step 7 for any write: the yes its mode asks for, from people on the approval page (``url``) or from the
client's form (``form``, ``typed``), with the audit entry told what was asked and answered.

A planned write and a pass-through write differ only in what they check right before asking (``ready``: a
planned write re-reads its target, whose reported name the page shows) and whether a refusal names a tool to start
over with (a planned write's preview). A declined or cancelled form uses a stored plan up, so the same plan never
prompts again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import mcp_types as types
from mcp.server import ServerRequestContext

from gateway.approvals.digest import digest_of, facts_of, short
from gateway.approvals.lifecycle import approvers_of
from gateway.approvals.policy import Choice, decided_by
from gateway.identity.standing import bearer_of
from gateway.records import Plan
from gateway.write.ask import form, people
from gateway.write.ask.task import open_task, wants_task, wants_tool_approval
from gateway.write.audited import AuditedCall, Interim
from gateway.write.progress import ASKING
from gateway.write.steps import confirmation_schema, require_form, require_yes, uses_up_plan


async def ask(
    call: AuditedCall,
    ctx: ServerRequestContext[Any, Any],
    params: types.CallToolRequestParams,
    plan: Plan,
    key: str,
    message: str,
    choice: Choice,
    wait_seconds: float,
    *,
    ready: Callable[[], Awaitable[str | None]],
    start_over: str | None,
    policy: dict[str, Any],
) -> Interim | None:
    """None once the yes is given; a request for input (2026) or a task (the tasks extension) to answer with as it
    is; raises ToolError otherwise. ``policy``: the definition of the rule that chose the mode (or of the tool's own
    confirm), whose version the facts' digest binds (gateway.approvals.digest)."""
    gw = call.gw
    facts = facts_of(plan, message, choice.rule, policy)
    digest = digest_of(facts)
    signed = {"passkey": "required"} if choice.mode == "url" and gw.config.passkey_required(plan.tool) else {}
    decided = {**decided_by(choice), "factsDigest": digest, **signed}
    call.note(extra=decided)  # a refusal from here on (pending, rejected, declined) names the mode and rule
    if choice.mode == "url":
        named = await ready()
        request = people.ask_for(gw, plan, key, message, choice, wait_seconds, target_name=named, facts=facts)
        if wants_task(ctx):
            most = gw.config.approvals.max_tasks_per_caller
            bearer = bearer_of(getattr(ctx.request, "headers", None))
            return await open_task(
                gw, params, request, call.name, most, tool_approval=wants_tool_approval(ctx), bearer=bearer
            )
        await call.progress(ASKING)
        approved = await people.approve(ctx, params, request, gw)
        if isinstance(approved, types.InputRequiredResult):
            return approved
        call.note(confirmation="approved", extra={**decided, "approvers": approvers_of(approved)})
        call.approved = True
        return None
    require_form(ctx.session.client_capabilities)
    await ready()
    question = form.Question(
        message=f"{message} (facts digest {short(digest)})",
        schema=confirmation_schema(choice.mode, plan),
        caller=call.caller,
        plan_id=plan.plan_id,
        key=key,
        timeout=wait_seconds,
    )
    await call.progress(ASKING)
    answer = await form.ask(ctx, params, question, gw.store, gw.clock())
    if isinstance(answer, types.InputRequiredResult):
        return answer
    call.note(confirmation=answer.action if answer is not None else "timeout")
    if uses_up_plan(answer):
        await gw.store.consume_plan(plan.plan_id)
    require_yes(answer, choice.mode, plan, start_over)
    return None
