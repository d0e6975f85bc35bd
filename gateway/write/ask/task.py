"""Step 7 of a url-mode write as an MCP task (the tasks extension, ``io.modelcontextprotocol/tasks``): instead of
holding the request open while people decide, the call is answered with a task at once, and the gateway calls the
write again itself, as the same caller, once the approval is decided (gateway.mcp.resume resumes it).

    wants_task   the client declared the extension on this request (2026-07-28 wire, per-request capabilities),
                 and this call is not the gateway's own resumption of a task
    wants_tool_approval  it declared the tool-approval extension beside it (the SEP-2848 draft): the task is made,
                 shown and ended in that draft's shape (gateway.mcp.approval)
    open_task    the approval (made as for any url-mode write) and a task for it, stored before it is answered;
                 a call with the same caller and key while its task is live gets that task again, never a second

A task is bound to its caller: who asked (the token's client, issuer, subject and scopes) is kept with it, to act as
when the call is resumed, and what is needed to check that the caller still may (a static token's hash, any other
token sealed with the gateway's key: gateway.identity.standing); another caller's ``tasks/get`` finds nothing. Its
outcome is the key's outcome: the resumed call is a retry with the same key, so a key that has settled replays.
"""

from __future__ import annotations

import secrets
from typing import Any

import mcp_types as types
from mcp.server import ServerRequestContext

from gateway.errors import Code, ToolError
from gateway.identity.caller import current_identity
from gateway.identity.standing import CREDENTIAL, kept
from gateway.protocol import TASKS_EXTENSION, TOOL_APPROVAL_EXTENSION, resuming, stateless
from gateway.records import Task
from gateway.write.ask import people
from gateway.write.parts import Parts

RESULT_SECONDS = 3600.0
"""How long a task outlives its approval's expiry, so that its result can still be read."""


def wants_task(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether this call may be answered with a task: the extension declared on this 2026-07-28 request, and not
    the gateway's own resumption of one."""
    if resuming.get() is not None or not stateless(ctx.protocol_version):
        return False
    capabilities = ctx.session.client_capabilities
    return capabilities is not None and TASKS_EXTENSION in (capabilities.extensions or {})


def wants_tool_approval(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether this call, answered with a task, declared the tool-approval extension too."""
    capabilities = ctx.session.client_capabilities
    return capabilities is not None and TOOL_APPROVAL_EXTENSION in (capabilities.extensions or {})


async def open_task(
    gw: Parts,
    params: types.CallToolRequestParams,
    request: people.ApprovalAsk,
    tool: str,
    max_live: int,
    *,
    tool_approval: bool = False,
    bearer: str | None = None,
) -> Task:
    """The task a url-mode write is answered with: its approval made (or found), the task stored, or the live one
    this caller's key already has. A caller past ``max_live`` live tasks is refused (a check, not a lock: replicas
    racing may each pass it once)."""
    approval = await people.approval_for(request, gw)
    plan, now = request.plan, gw.clock()
    live = [task for task in await gw.store.live_tasks(now) if task.caller == plan.caller]
    found = next((task for task in live if task.key == request.key), None)
    if found is None and len(live) >= max_live:
        raise ToolError(
            Code.TOO_MANY_TASKS,
            f"This caller already has {max_live} live tasks. Nothing was changed; wait for some to finish or"
            " cancel them (tasks/cancel).",
        )
    stored = found or await gw.store.create_task(
        Task(
            task_id="tk_" + secrets.token_urlsafe(16),
            caller=plan.caller,
            tool=tool,
            key=request.key,
            arguments=dict(params.arguments or {}),
            plan_id=plan.plan_id,
            approval_id=approval.approval_id,
            created_at=now,
            updated_at=now,
            expires_at=approval.expires_at + RESULT_SECONDS,
            identity=_identity(gw, bearer),
            status="working" if tool_approval else "input_required",
            tool_approval=tool_approval,
            digest=approval.digest,
        )
    )
    if stored.plan_id != plan.plan_id:  # the key's live task is another plan's: the key is not this call's
        raise ToolError(
            Code.IDEMPOTENCY_KEY_REUSED,
            "This idempotencyKey already belongs to a task for another plan. Use a new key for a new plan.",
        )
    await people.held(gw, approval, approval.expires_at)  # the task resumes the write once it is approved
    return stored


def _identity(gw: Parts, bearer: str | None) -> dict[str, Any]:
    """Who the task acts for, and what it keeps of their credential to check it again when it resumes
    (gateway.identity.standing: never the token in clear)."""
    identity = current_identity()
    credential = kept(gw.config.auth, bearer, gw.keys) if identity else None
    return {**identity, CREDENTIAL: credential} if credential is not None else identity
