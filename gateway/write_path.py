"""The write path's decisions, as pure functions over data. No I/O happens here.

Theory of operation. A destructive call carries only ``planId`` and ``idempotencyKey``. It passes these
steps in order; each either lets it through or refuses with a stable code, and nothing before step 9
changes anything outside the gateway's own store:

    step  what is checked                         refusal codes                    decided by
    1     arguments: schema and size caps         invalid_arguments, request_too_large   catalog
    2     the caller may use the tool             forbidden / unknown tool         server
    3     the key's record, before any prompt     idempotency_key_reused, request_in_progress,
                                                  outcome_unknown; or replay       after_key_lookup
    4     the plan: exists, live, caller, tool    plan_not_found, plan_expired     check_plan
    5     the client can be asked (form)          confirmation_unavailable         check_can_ask
    6     the target has not moved on             tenant_not_found, tenant_protected, plan_stale
                                                                                   check_target
    7     the user said yes                       not_confirmed                    check_answer
    8     lock, claim key + plan, re-check 6      request_in_progress, plan_stale  check_target
    9     the backend's answer becomes the outcome                                 settle

The idempotency record is a small state machine (KEY_TRANSITIONS): a key is claimed before the backend is
called, and it ends applied, unknown or error; only a claim whose call was never sent is released.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

import mcp.types as types

from gateway.backend import Reply
from gateway.errors import ToolError
from gateway.stores.base import Expired, KeyRecord, KeyState, Plan
from gateway.tenants import Tenant

ABSENT = "absent"

KEY_TRANSITIONS: dict[tuple[str, str], str] = {
    (ABSENT, "claim"): "in_flight",
    ("in_flight", "release"): ABSENT,
    ("in_flight", "applied"): "applied",
    ("in_flight", "unknown"): "unknown",
    ("in_flight", "error"): "error",
}


def next_key_state(state: str, event: str) -> str:
    """The key's state after an event; ValueError for a transition the write path never makes."""
    try:
        return KEY_TRANSITIONS[(state, event)]
    except KeyError:
        raise ValueError(f"illegal idempotency transition: {event!r} from {state!r}") from None


class AfterLookup(Enum):
    PROCEED = "proceed"
    REPLAY = "replay"
    UNKNOWN = "unknown"


def after_key_lookup(record: KeyRecord | None, plan_id: str) -> AfterLookup:
    """Step 3: what an existing record for this key means for this call."""
    if record is None:
        return AfterLookup.PROCEED
    if record.plan_id != plan_id:
        raise ToolError(
            "idempotency_key_reused",
            "This idempotencyKey was already used with a different plan. Use a new key for a new plan.",
        )
    if record.state == "in_flight":
        raise ToolError(
            "request_in_progress",
            "A call with this idempotencyKey is still running. Retry it in a few seconds.",
        )
    if record.state == "error":
        raise ToolError(**stored_error(record))
    if record.state == "unknown":
        return AfterLookup.UNKNOWN
    return AfterLookup.REPLAY


def check_plan(found: Plan | Expired | None, caller: str, tool: str, preview: str) -> Plan:
    """Step 4: the plan exists, is live, belongs to this caller and is for this tool."""
    if isinstance(found, Expired):
        if found.caller == caller:
            raise ToolError("plan_expired", f"This plan has expired. Call {preview} again.", next_tool=preview)
        found = None
    if found is None or found.caller != caller or found.tool != tool:
        raise ToolError(
            "plan_not_found", f"No such plan for this caller. Call {preview} to get one.", next_tool=preview
        )
    return found


def check_can_ask(capabilities: types.ClientCapabilities | None) -> None:
    """Step 5: the client declared form elicitation (an empty ``elicitation: {}`` means form)."""
    elicitation = capabilities.elicitation if capabilities is not None else None
    if elicitation is None or (elicitation.form is None and elicitation.url is not None):
        raise ToolError(
            "confirmation_unavailable",
            "This client cannot show a confirmation form, so the write will not run. Nothing was changed.",
        )


def check_target(plan: Plan, current: Tenant, preview: str) -> None:
    """Steps 6 and 8: the target is still what the plan was made from."""
    if current.protected:
        raise ToolError("tenant_protected", f"{current.id} is protected; the gateway will not reset it.")
    if current.version != plan.version:
        raise ToolError(
            "plan_stale",
            f"{plan.target} changed since the preview (version {plan.version} -> {current.version}). "
            f"Call {preview} again.",
            next_tool=preview,
        )


def confirmation_message(plan: Plan) -> str:
    """The question, with the effect in numbers."""
    return (
        f"Delete {plan.rows_deleted} rows in {plan.target} and load fixture "
        f'"{plan.fixture}" ({plan.rows_inserted} rows)?'
    )


def confirmation_schema(mode: str, plan: Plan) -> dict[str, Any]:
    """The form: a boolean ``confirm``, or a typed ``confirmTarget`` that must equal the target id."""
    if mode == "typed":
        prop = {"type": "string", "title": f"Type {plan.target} to confirm", "maxLength": 64}
        return {"type": "object", "properties": {"confirmTarget": prop}, "required": ["confirmTarget"]}
    prop = {"type": "boolean", "title": "Reset this tenant"}
    return {"type": "object", "properties": {"confirm": prop}, "required": ["confirm"]}


def check_answer(answer: types.ElicitResult | None, mode: str, plan: Plan) -> str:
    """Step 7: only an accepted, correctly filled form counts as yes. Returns the answer for the audit."""
    if answer is None:
        raise ToolError("not_confirmed", "No answer came before the prompt timed out. Nothing was changed.")
    content = answer.content or {}
    if answer.action == "accept":
        if mode == "typed" and content.get("confirmTarget") == plan.target:
            return "accept"
        if mode != "typed" and content.get("confirm") is True:
            return "accept"
        raise ToolError("not_confirmed", "The confirmation was not given as asked. Nothing was changed.")
    raise ToolError("not_confirmed", f"The user did not confirm ({answer.action}). Nothing was changed.")


LOST = None  # a backend call that was sent and never answered


@dataclass(frozen=True)
class Settlement:
    """Step 9's decision: the key's final state and what the caller is told."""

    state: KeyState
    result: dict[str, Any]

    def error(self) -> ToolError | None:
        """The refusal to raise, for states that are not applied."""
        return None if self.state == "applied" else ToolError(**self.result)


def needs_reread(reply: Reply | None) -> bool:
    """Whether settling this reply needs a fresh read of the target."""
    return reply is LOST or (not reply.is_error and _reported_version(reply) is None)


def settle(plan: Plan, reply: Reply | None, reread: Tenant | None, preview: str) -> Settlement:
    """Step 9: the outcome of a sent write. A write that happened is never reported as a failure."""
    if reply is not LOST and reply.is_error:
        return Settlement(
            "error",
            _error_body(
                "backend_error",
                f"The legacy backend refused the write. Call {preview} again before retrying.",
                preview,
            ),
        )
    base = {"planId": plan.plan_id, "tenantId": plan.target, "fixture": plan.fixture}
    if reply is not LOST:
        version = _reported_version(reply)
        if version is not None:
            data = reply.json()
            counts = {
                "rowsDeleted": _count(data.get("rowsDeleted"), plan.rows_deleted),
                "rowsInserted": _count(data.get("rowsInserted"), plan.rows_inserted),
            }
            return Settlement("applied", {**base, **counts, "version": version})
        if reread is not None and reread.version > plan.version:
            counts = {"rowsDeleted": plan.rows_deleted, "rowsInserted": plan.rows_inserted}
            return Settlement("applied", {**base, **counts, "version": reread.version})
    return Settlement("unknown", outcome_unknown_body(reread))


def outcome_unknown_body(current: Tenant | None) -> dict[str, Any]:
    """The outcome_unknown refusal, carrying the target as it reads now (or null)."""
    return {
        "code": "outcome_unknown",
        "message": "The backend did not confirm whether the write happened. This key will never write again; "
        "check details.current, and preview again with a new key only if the reset is still needed.",
        "details": {"current": current.as_json() if current is not None else None},
    }


def stored_error(record: KeyRecord) -> dict[str, Any]:
    """The ToolError arguments a settled error record replays."""
    body = dict(record.result or {})
    return {
        "code": body.get("code", "backend_error"),
        "message": body.get("message", "The earlier call with this key failed."),
        "next_tool": body.get("next_tool"),
        "details": body.get("details"),
    }


def _error_body(code: str, message: str, next_tool: str | None) -> dict[str, Any]:
    return {"code": code, "message": message, "next_tool": next_tool}


def _reported_version(reply: Reply) -> int | None:
    data = reply.json()
    version = data.get("version") if isinstance(data, dict) else None
    return version if isinstance(version, int) and not isinstance(version, bool) else None


def _count(value: Any, fallback: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else fallback
