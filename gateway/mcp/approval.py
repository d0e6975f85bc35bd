"""The tool-approval extension (``io.modelcontextprotocol/tool-approval``, the SEP-2848 draft; experimental) over the
tasks extension: a url-mode write whose client declared both is a task in the draft's shape.

A task is made in the draft's shape when the call that made it declared both extensions (2026-07-28, per request:
gateway.write.ask.task); a client that declared tasks alone, or neither, keeps the tasks extension's own shape
(gateway.mcp.tasks) or today's answers.

    created    the CreateTaskResult: ``working`` at once (the write does not run yet), a ``statusMessage``, and in
               ``_meta`` the structured denial (SEP-2643: remediation available, a ``task`` hint first, then the
               page and who must approve there) and ``model-immediate-response``, a sentence for the model saying
               the write has not run and may still be denied
    waiting    ``tasks/get`` (and ``notifications/tasks``) while the task is not terminal: ``working``, never
               ``input_required`` (the approval is decided out of band: nothing is asked of the client), with the
               structured denial repeated in ``_meta`` each time
    ended      a resumed call's answer as the task's end, by what became of the write:

        the write ran once                        completed                   approved-executed
        sent, and the backend refused it          completed, isError          execution-error
        sent, and no answer came                  completed, isError          outcome-unknown
        refused before its claim (rejected,       completed, isError,         denied-not-executed
          expired, a rule's deny, the target        denial unavailable
          moved on, the caller no longer
          allowed, ...)
        the gateway failed before sending         failed (an error object)    none

               The disposition is in the result's ``_meta`` (``io.modelcontextprotocol/tool-approval-disposition``),
               and the result's content says it in words too (a last text block), so the model behind a client that
               knows neither extension's ``_meta`` reads whether the tool ran. The structured denial is on denials
               only, never on an execution error or an unknown outcome. ``tasks/cancel`` ends the task
               ``cancelled`` (no disposition) up to the write's claim (gateway.mcp.tasks)

Every sentence here is the gateway's own: ids, counts, times and the page's address, never text from a backend, a
caller or an approver. What the draft leaves open, and what was chosen, is in docs/tasks-and-approvals.md.
"""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types

from gateway.approvals.lifecycle import State, approval_url, approved_by, state
from gateway.errors import (
    AUTHORIZATION_META,
    AVAILABLE,
    UNAVAILABLE,
    Code,
    approval_hints,
    authorization_denial,
)
from gateway.protocol import DISPOSITION_META, MODEL_RESPONSE_META
from gateway.records import Approval
from gateway.text import rfc3339

APPROVED_EXECUTED = "approved-executed"
DENIED_NOT_EXECUTED = "denied-not-executed"
EXECUTION_ERROR = "execution-error"
OUTCOME_UNKNOWN = "outcome-unknown"
SAID = {
    APPROVED_EXECUTED: "The tool ran: people approved this call, and it was carried out once.",
    DENIED_NOT_EXECUTED: "The tool did not run: this call was denied ({code}). Nothing was changed.",
    EXECUTION_ERROR: "The tool ran after approval, and the backend refused it ({code}): it may have changed something.",
    OUTCOME_UNKNOWN: "The tool may have run: it was sent after approval and no answer came back ({code}). Do not call"
    " it again blindly.",
}
"""The disposition in words, as the result's last text block says it."""
RAN = {Code.BACKEND_ERROR.value: EXECUTION_ERROR, Code.OUTCOME_UNKNOWN.value: OUTCOME_UNKNOWN}
"""Refusals that come after the write was sent: the tool ran, or may have."""
FAILED = frozenset({Code.INTERNAL_ERROR.value})
"""Refusals of a gateway that failed before sending (the key is free): the task fails, it is not a denial."""


def awaited(base: str, approval: Approval) -> dict[str, Any]:
    """The structured denial of a write that waits for people: a task to follow, the page, who must approve."""
    so_far = len(approved_by(approval))
    url = approval_url(base, approval.approval_id)
    expires = rfc3339(approval.expires_at)
    people = approval_hints(url, approval.approval_id, expires, approval.approvers_needed, so_far, approval.four_eyes)
    return authorization_denial(AVAILABLE, [{"type": "task"}, *people], context=approval.approval_id)


def created(fields: dict[str, Any], base: str, approval: Approval, now: float) -> dict[str, Any]:
    """The CreateTaskResult of a write that waits for people."""
    shown = waiting(fields, base, approval, now)
    needed = approval.approvers_needed - len(approved_by(approval))
    immediate = (
        f"This write has not run: it waits for {needed} more approval(s) by people on the gateway's approval page"
        f" until {rfc3339(approval.expires_at)}, and it may still be denied. Continue with other work and check"
        " this task later."
    )
    return {"resultType": "task", **shown, "_meta": {**shown["_meta"], MODEL_RESPONSE_META: immediate}}


def waiting(fields: dict[str, Any], base: str, approval: Approval, now: float) -> dict[str, Any]:
    """The task while it is not terminal: working, with the structured denial repeated."""
    current = state(approval, now)
    if current is State.PENDING:
        needed = approval.approvers_needed - len(approved_by(approval))
        others = ", none of them the caller" if approval.four_eyes else ""
        message = (
            f"Waiting for {needed} more approval(s) of {approval.approvers_needed}{others} at"
            f" {approval_url(base, approval.approval_id)} until {rfc3339(approval.expires_at)}"
        )
    elif current is State.APPROVED:
        message = "Approved: the write is being carried out"
    else:
        message = f"The approval is {current.value}: the task is ending"
    denial = {AUTHORIZATION_META: awaited(base, approval)}
    return {**fields, "status": "working", "statusMessage": message, "_meta": denial}


def ended(answered: types.CallToolResult, code: str | None) -> tuple[str, dict[str, Any] | None, dict[str, Any] | None]:
    """The task's end for a resumed call's answer (``code``: its refusal's, None for a success): its status, and
    its result (a CallToolResult as JSON, with its disposition) or its error."""
    if code in FAILED:
        return "failed", None, {"code": types.INTERNAL_ERROR, "message": _message(answered) or "Internal error"}
    disposition = APPROVED_EXECUTED if code is None else RAN.get(code, DENIED_NOT_EXECUTED)
    result = answered.model_dump(by_alias=True, mode="json", exclude_none=True)
    meta = {key: value for key, value in (result.get("_meta") or {}).items() if key != AUTHORIZATION_META}
    if disposition == DENIED_NOT_EXECUTED:
        context = ((answered.meta or {}).get(AUTHORIZATION_META) or {}).get("authorizationContextId")
        meta[AUTHORIZATION_META] = authorization_denial(UNAVAILABLE, context=context)
    meta[DISPOSITION_META] = disposition
    said = {"type": "text", "text": SAID[disposition].format(code=code)}
    return "completed", {**result, "content": [*result.get("content", []), said], "_meta": meta}, None


def _message(answered: types.CallToolResult) -> str | None:
    block = answered.content[0] if answered.content else None
    if not isinstance(block, types.TextContent):
        return None
    try:
        message = json.loads(block.text).get("message")
    except (ValueError, AttributeError):
        return None
    return message if isinstance(message, str) else None
