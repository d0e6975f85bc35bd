"""The tasks extension (``io.modelcontextprotocol/tasks``, 2026-07-28) on the MCP surface: the methods a client
follows a task with, and the gateway resuming a task's call once people decided.

A url-mode write from a client that declared the extension on its request is answered with a task at once
(gateway.write.ask.task). From then on:

    tasks/get      the task as stored, read cheaply (the task and its approval from the store, no backend call):
                   ``input_required`` with the approval link as a url elicitation while people decide (the status
                   message says how many approved and until when), ``working`` once the client answered the link
                   or people decided, then ``completed`` with the call's result inlined (a refusal too:
                   ``isError``), or ``failed`` / ``cancelled``
    tasks/update   an answer to the link: a decline or cancel cancels the task; an accept only answers it (the
                   page decides), so the task shows ``working`` and the answered request is not asked again (the
                   extension asks each input key once: a client that does not deduplicate keys would answer it
                   again at every poll)
    tasks/cancel   before the decision: the plan is ended (no write can follow), its approval ends (cancelled: the
                   page says so and takes no late decision) and the task is cancelled, with an audit entry; after
                   it, a write cannot be undone, and the task's status message says so (a tool-approval task:
                   only after the write's claim)
    resume         once the approval is decided, the gateway calls the tool again itself (gateway.mcp.resume)

A task made by a call that declared the tool-approval extension too is shown in that draft's shape instead
(gateway.mcp.approval): ``working`` while people decide, the structured denial repeated in ``_meta``, and a
disposition when it completes.

Every method answers only the caller that created the task (anyone else: -32602, as for an unknown id), only a
request that declared the extension (else -32021, naming it), and, over HTTP, only a request whose ``Mcp-Name``
header, when sent, names the same task as its ``taskId`` (else -32020).
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import MCP_NAME_HEADER, decode_header_value
from mcp_types.jsonrpc import HEADER_MISMATCH
from pydantic import Field

from gateway.approvals import results
from gateway.approvals.lifecycle import State, approval_url, approved_by, state
from gateway.audit import entries, trail
from gateway.identity.caller import current_caller
from gateway.identity.standing import CREDENTIAL
from gateway.mcp import approval as tool_approval
from gateway.protocol import TASKS_EXTENSION, TOOL_APPROVAL_EXTENSION
from gateway.records import TERMINAL, Approval, Plan, Task, next_task_status
from gateway.runtime import Gateway
from gateway.text import rfc3339

POLL_SECONDS = 0.5
"""How often a gateway looks for tasks to resume (and the poll interval it suggests to clients, doubled)."""
ANSWER_KEY = "approval"
"""The one input request a task asks: open the approval link."""

log = logging.getLogger(__name__)


class TaskParams(types.RequestParams):
    task_id: str = Field(alias="taskId")


class UpdateParams(TaskParams):
    input_responses: dict[str, Any] = Field(default_factory=dict, alias="inputResponses")


def register(server: Server[Any], gw: Gateway) -> None:
    """Advertise the extensions (tasks, and tool-approval over it) and serve the task methods on ``server``."""
    server.extensions[TASKS_EXTENSION] = {}
    server.extensions[TOOL_APPROVAL_EXTENSION] = {}

    async def get(ctx: ServerRequestContext[Any, Any], params: TaskParams) -> dict[str, Any]:
        task = await _own(gw, ctx, params.task_id)
        approval = await gw.store.get_approval(task.approval_id)
        return {"resultType": "complete", **detailed(gw, task, approval)}

    async def update(ctx: ServerRequestContext[Any, Any], params: UpdateParams) -> dict[str, Any]:
        task = await _own(gw, ctx, params.task_id)
        response = params.input_responses.get(ANSWER_KEY)
        action = response.get("action") if isinstance(response, dict) else None
        if action in ("decline", "cancel"):
            await cancel_task(gw, task, "the user declined to open the approval page")
        elif action == "accept":
            await _link_answered(gw, task)
        return {"resultType": "complete"}

    async def cancel(ctx: ServerRequestContext[Any, Any], params: TaskParams) -> dict[str, Any]:
        await cancel_task(gw, await _own(gw, ctx, params.task_id), "cancelled by the caller")
        return {"resultType": "complete"}

    server.add_request_handler("tasks/get", TaskParams, get)
    server.add_request_handler("tasks/update", UpdateParams, update)
    server.add_request_handler("tasks/cancel", TaskParams, cancel)


async def created(gw: Gateway, task: Task) -> dict[str, Any]:
    """The CreateTaskResult a call is answered with: the task's fields, flat, with ``resultType: "task"`` (a
    tool-approval task's in that draft's shape)."""
    approval = await gw.store.get_approval(task.approval_id) if task.tool_approval else None
    if approval is not None:
        return tool_approval.created(_fields(task), gw.approvals_url or "", approval, gw.clock())
    return {"resultType": "task", **_fields(task)}


def detailed(gw: Gateway, task: Task, approval: Approval | None) -> dict[str, Any]:
    """The task as ``tasks/get`` shows it: its status now, the link while people decide, the result once done."""
    fields = _fields(task)
    if task.status == "completed":
        return {**fields, "result": task.result or {}}
    if task.status == "failed":
        return {**fields, "error": task.error or {"code": types.INTERNAL_ERROR, "message": "Internal error"}}
    if task.status == "cancelled" or approval is None:
        return fields
    now = gw.clock()
    if task.tool_approval:
        return tool_approval.waiting(fields, gw.approvals_url or "", approval, now)
    waiting = state(approval, now)
    if waiting is State.PENDING:
        url = approval_url(gw.approvals_url or "", approval.approval_id)
        link = {"mode": "url", "message": approval.message, "url": url, "elicitationId": approval.approval_id}
        so_far = approved_by(approval)
        message = (
            f"Waiting for {approval.approvers_needed - len(so_far)} more approval(s) at {url} until"
            f" {rfc3339(approval.expires_at)}" + (f"; approved so far by {', '.join(so_far)}" if so_far else "")
        )
        if task.status != "input_required":  # the client answered the link: people decide, it is not asked again
            return {**fields, "status": "working", "statusMessage": message}
        request = {"method": "elicitation/create", "params": link}
        return {**fields, "status": "input_required", "statusMessage": message, "inputRequests": {ANSWER_KEY: request}}
    decided = "approved: the write is being applied" if waiting is State.APPROVED else f"{waiting.value}: ending"
    return {**fields, "status": "working", "statusMessage": task.message or decided}


def _fields(task: Task) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "taskId": task.task_id,
        "status": task.status,
        "createdAt": rfc3339(task.created_at),
        "lastUpdatedAt": rfc3339(task.updated_at),
        "ttlMs": int((task.expires_at - task.created_at) * 1000),
        "pollIntervalMs": int(POLL_SECONDS * 2000),
    }
    if task.message is not None:
        fields["statusMessage"] = task.message
    return fields


def _routed(ctx: ServerRequestContext[Any, Any], task_id: str) -> None:
    """-32020 when an HTTP request's ``Mcp-Name`` header names another task than its ``taskId`` (the extension's
    routing header: a load balancer may have sent it to the replica of the task the header names)."""
    headers = getattr(ctx.request, "headers", None)
    named = headers.get(MCP_NAME_HEADER) if headers is not None else None
    if named is not None and decode_header_value(named) != task_id:
        raise MCPError(code=HEADER_MISMATCH, message="Mcp-Name header does not match the request body's 'taskId'")


def require_extension(ctx: ServerRequestContext[Any, Any]) -> None:
    """-32021, naming the extension, unless this request declared it."""
    capabilities = ctx.session.client_capabilities
    if capabilities is None or TASKS_EXTENSION not in (capabilities.extensions or {}):
        raise MCPError(
            code=types.MISSING_REQUIRED_CLIENT_CAPABILITY,
            message="Missing required client capability",
            data={"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}},
        )


async def _own(gw: Gateway, ctx: ServerRequestContext[Any, Any], task_id: str) -> Task:
    """The caller's own live task by id; -32021 when the request did not declare the extension, -32602 for an id
    this caller has no task under (another caller's included) or whose task expired; -32020 for a request whose
    routing header names another task."""
    _routed(ctx, task_id)
    require_extension(ctx)
    task = await gw.store.get_task(task_id[:128])
    if task is None or task.caller != current_caller(gw.config.gateway.stdio_caller):
        raise MCPError(code=types.INVALID_PARAMS, message="Failed to retrieve task: Task not found")
    if gw.clock() >= task.expires_at:
        raise MCPError(code=types.INVALID_PARAMS, message="Failed to retrieve task: Task has expired")
    return task


async def _link_answered(gw: Gateway, task: Task) -> None:
    """The client answered the approval link (the person opens it): the task is ``working`` while people decide."""
    async with gw.store.lock(lock_name(task)):
        current = await gw.store.get_task(task.task_id)
        if current is not None and current.status == "input_required":
            await save(gw, moved(current, "working", gw.clock()))


async def cancel_task(gw: Gateway, task: Task, why: str) -> None:
    """End a task before its write is claimed: its plan is consumed (atomically against the write's claim of the
    key and the plan, so either the cancel or the write wins, never both), its approval ends (``cancelled``) and
    the task is cancelled, with an audit entry naming the target. A write already claimed runs to its outcome: the
    task goes on, and its status message says the cancel came too late. A task of the tasks extension alone also
    goes on once people approved (the rule before the tool-approval draft, kept for its clients)."""
    async with gw.store.lock(lock_name(task)):
        current = await gw.store.get_task(task.task_id)
        if current is None or current.terminal:
            return
        approval = await gw.store.get_approval(current.approval_id)
        now = gw.clock()
        if approval is not None and state(approval, now) is State.APPROVED and not current.tool_approval:
            message = "cancel refused: the write was already approved and cannot be undone; it runs to its outcome"
            await save(gw, replace(current, message=message, updated_at=now))
            return
        consumed = await gw.store.consume_plan(current.plan_id)
        if not consumed and isinstance(await gw.store.get_plan(current.plan_id, now), Plan):
            message = "cancel refused: the write was already claimed and cannot be undone; it runs to its outcome"
            await save(gw, replace(current, message=message, updated_at=now))
            return
        if consumed:  # else the plan was gone already (expired, rejected, used): its approval says so itself
            await results.cancelled(gw.store, current.approval_id, now)
        target = approval.target if approval is not None else None
        await trail.append(gw.store, entries.cancelled(current, now, why, target))
        await save(gw, moved(current, "cancelled", now, message=f"Nothing was written: {why}."))


def moved(task: Task, status: str, now: float, **changes: Any) -> Task:
    """The task in its next status; one that ends drops what it kept of its caller's credential."""
    if status in TERMINAL:
        changes.setdefault("identity", {key: value for key, value in task.identity.items() if key != CREDENTIAL})
    return replace(task, status=next_task_status(task, status), updated_at=now, **changes)


async def save(gw: Gateway, task: Task) -> None:
    """Store a task changed under its lock; one changed meanwhile by another replica is read and left as it is."""
    if not await gw.store.replace_task(task):
        log.warning("task %s changed under its lock; this change (%s) was not stored", task.task_id, task.status)


def lock_name(task: Task) -> str:
    return "task:" + task.task_id
