"""Resuming a task: every gateway looks at the live tasks (``POLL_SECONDS``) and, for one whose approval is decided
or whose wait is over, calls the tool again under the task's lock, as the caller that asked
(gateway.identity.caller.acting_as): a retry with the same key, so the key's claim decides, and any replica, after
any restart, may do it.

The caller is first checked again as if it called now (gateway.identity.standing): one that no longer stands is
refused with ``caller_revoked``, its plan ended, the refusal audited, and nothing called; its task fails (a
tool-approval task: a terminal denial). Otherwise the call's answer becomes the task's end (gateway.mcp.tasks shows
it; a tool-approval task in that draft's shape: gateway.mcp.approval), except an answer that leaves the outcome
open (``TRY_AGAIN``), which is tried again every RETRY_SECONDS.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import mcp_types as types
from mcp.shared.exceptions import MCPError

from gateway.approvals import results
from gateway.approvals.lifecycle import State, state
from gateway.audit import entries, trail
from gateway.errors import ToolError
from gateway.identity.caller import acting_as
from gateway.identity.standing import recheck
from gateway.mcp import approval as tool_approval
from gateway.mcp.calls import answer, error_code, error_result, outcome_label
from gateway.mcp.tasks import POLL_SECONDS, lock_name, moved, save
from gateway.protocol import STATELESS_ERA, resuming
from gateway.records import Task
from gateway.runtime import Gateway

TRY_AGAIN = frozenset({"backend_unavailable", "request_in_progress"})
"""A resumed call's answers that leave the task's outcome open: nothing was sent and the key is free, or another
call holds the key right now (its outcome will be this key's, replayed at the next try). The task stays."""
REVOKED = types.INVALID_REQUEST
"""The JSON-RPC code of a task failed because its caller no longer stands; its data is the refusal's body
(``caller_revoked``) with its structured denial under ``authorization``, as SEP-2643 puts it on an error."""
RETRY_SECONDS = 5.0
"""How long a task waits between tries after such a refusal."""

log = logging.getLogger(__name__)


@asynccontextmanager
async def resumed(gw: Gateway, poll_seconds: float = POLL_SECONDS) -> AsyncIterator[None]:
    """Resume this gateway's share of the live tasks in the background while the block runs."""
    async with anyio.create_task_group() as group:
        group.start_soon(_resume_forever, gw, poll_seconds)
        try:
            yield
        finally:
            group.cancel_scope.cancel()


async def _resume_forever(gw: Gateway, poll_seconds: float) -> None:
    while True:
        try:
            await resume_due(gw)
        except Exception as exc:  # a store that fails now may answer at the next poll
            log.warning("tasks not resumed this round: %s", type(exc).__name__)
        await anyio.sleep(poll_seconds)


async def resume_due(gw: Gateway) -> None:
    """Call again every live task whose approval is decided (or whose wait is over)."""
    now = gw.clock()
    for task in await gw.store.live_tasks(now):
        if task.next_try_at is not None and now < task.next_try_at:
            continue  # its last try sent nothing: not again yet
        approval = await gw.store.get_approval(task.approval_id)
        if approval is None or state(approval, now) is not State.PENDING:
            await resume(gw, task)


async def resume(gw: Gateway, task: Task) -> None:
    """Call the task's tool again as the caller that asked, under the task's lock, and keep the answer as the task's
    result. An answer that still waits (the approval pending after all) leaves the task as it is."""
    async with gw.store.lock(lock_name(task)):
        current = await gw.store.get_task(task.task_id)
        if current is None or current.terminal:
            return
        waited_as = current.status
        await save(gw, moved(current, "working", gw.clock(), next_try_at=None))
        current = await gw.store.get_task(task.task_id) or current
        try:
            identity = await recheck(gw.config, current.caller, current.identity, current.tool, gw.keys)
        except ToolError as revoked:
            await _revoked(gw, current, revoked)
            return
        params = types.CallToolRequestParams(name=current.tool, arguments=current.arguments)
        token = resuming.set(current.task_id)
        try:
            with acting_as(identity):
                answered = await answer(gw, _TaskContext.of(current), params)
        except MCPError as err:
            error = {"code": err.code, "message": err.error.message}
            await save(gw, moved(current, "failed", gw.clock(), error=error, message=err.error.message))
            return
        finally:
            resuming.reset(token)
        gw.metrics.calls.labels(current.tool, outcome_label(answered)).inc()
        code = error_code(answered) if isinstance(answered, types.CallToolResult) else "approval_pending"
        if code == "approval_pending":  # still waiting after all (another replica's view was ahead of this one)
            await save(gw, moved(current, waited_as, gw.clock()))
            return
        if code in TRY_AGAIN:  # nothing was sent and the key is free: the next round tries again
            message = f"{code}: the write is not settled; trying again every {RETRY_SECONDS:g} s until the plan expires"
            now = gw.clock()
            await save(gw, moved(current, "working", now, message=message, next_try_at=now + RETRY_SECONDS))
            return
        assert isinstance(answered, types.CallToolResult)
        await _end(gw, current, answered, code)


async def _revoked(gw: Gateway, task: Task, revoked: ToolError) -> None:
    """The caller no longer stands: nothing is called, the plan ends (its approval cannot be used by a later call),
    the approval's page says the write was not applied, the refusal is audited, and the task ends: failed, with
    the refusal as the error's data (a tool-approval task: a terminal denial, denied-not-executed)."""
    now = gw.clock()
    await gw.store.consume_plan(task.plan_id)
    await results.refused(gw.store, task.plan_id, revoked, now, past_approval=True)
    approval = await gw.store.get_approval(task.approval_id)
    target = approval.target if approval is not None else None
    facts = entries.Facts(task.caller, task.tool, plan_id=task.plan_id, idempotency_key=task.key, target=target)
    await trail.append(gw.store, entries.refused(facts, now, revoked.wire_code))
    gw.metrics.calls.labels(task.tool, revoked.wire_code).inc()
    log.info("task %s of %s: its caller no longer stands (%s)", task.task_id, task.tool, (revoked.details or {}))
    if task.tool_approval:
        await _end(gw, task, error_result(revoked), revoked.wire_code)
        return
    data = {**revoked.body(), "authorization": revoked.authorization}
    error = {"code": REVOKED, "message": revoked.message, "data": data}
    await save(gw, moved(task, "failed", now, error=error, message=revoked.message))


async def _end(gw: Gateway, task: Task, answered: types.CallToolResult, code: str | None) -> None:
    """The task ends with its call's answer: completed with the result inlined (a refusal too), or, for a
    tool-approval task, as that draft says (gateway.mcp.approval: a disposition, or failed)."""
    message = "the write was applied" if code is None else f"the call ended with {code}"
    if task.tool_approval:
        status, result, error = tool_approval.ended(answered, code)
        await save(gw, moved(task, status, gw.clock(), result=result, error=error, message=message))
    else:
        result = answered.model_dump(by_alias=True, mode="json", exclude_none=True)
        await save(gw, moved(task, "completed", gw.clock(), result=result, message=message))
    log.info("task %s of %s ended (%s)", task.task_id, task.tool, code or "applied")


@dataclass(frozen=True)
class _Session:
    """What a resumed call sees of a client: none that can be asked anything (it never needs to: the approval is
    decided), and progress goes nowhere."""

    client_capabilities: types.ClientCapabilities | None = None

    async def report_progress(self, *args: Any, **kwargs: Any) -> None:
        return None


@dataclass(frozen=True)
class _TaskContext:
    """The request context of a resumed call."""

    session: _Session
    request_id: str
    protocol_version: str = STATELESS_ERA

    @classmethod
    def of(cls, task: Task) -> Any:
        return cls(_Session(), f"task:{task.task_id}")
