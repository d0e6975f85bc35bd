"""The write path's decisions, as pure functions over data. No I/O happens here.

Theory of operation. A destructive call carries only ``planId`` and ``idempotencyKey``. It passes these
steps in order; each either lets it through or refuses with a stable code, and nothing before step 9
changes anything outside the gateway's own store. Steps 1 and 2 run for every tool, in the MCP surface's chain
(gateway.mcp.chain); step 3 (the key first) and steps 8-9 are the driver every write shares
(gateway.write.driver), and the I/O of steps 4-7 is a planned write's own (gateway.write.planned).

    step  what is checked                         refusal codes                    decided by
    1     the caller may use the tool, often      forbidden / unknown tool,        gateway.identity.caller,
          enough                                  rate_limited                     gateway.ratelimit
    2     arguments: size caps, then schema       request_too_large, invalid_arguments   gateway.catalog.published
    3     the key's record, before any prompt     idempotency_key_reused, request_in_progress,
                                                  outcome_unknown; or replay       after_key_lookup
    4     the plan: exists, live, caller, tool    plan_not_found, plan_expired     live_plan
    5     the client can be asked (form)          confirmation_unavailable         require_form
    6     the target has not moved on: its id,    {noun}_not_found, {noun}_protected, require_unchanged
          version and every planned number        plan_stale (lookups read afresh)
    7     the user said yes (form), or enough     not_confirmed, approval_pending  require_yes,
          approvers did on the page (url); a form                                  uses_up_plan,
          declined or cancelled uses the plan up (the key stays free)              gateway.write.ask.people
    8     lock, claim key + plan, re-check 6      request_in_progress, plan_stale  plan_in_use, require_unchanged
    9     the backend's answer becomes the outcome (applied, unknown,             settle
          error), reporting only values that fit the output schema

The idempotency record is a small state machine (KEY_TRANSITIONS, kept in gateway.records, where every store
reads it too): a key is claimed before the backend is called, and it ends applied, unknown or error; only a
claim whose call was never sent is released.

This module imports records, config, errors and text helpers only (tests/system/test_layout_imports.py holds it
to that).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any

from gateway.config import WriteTool
from gateway.config.expressions import MISSING, at_path, render
from gateway.errors import AVAILABLE, Code, ToolError, authorization_denial, confirmation_hint
from gateway.records import KEY_TRANSITIONS as KEY_TRANSITIONS
from gateway.records import Expired, KeyRecord, KeyState, Plan, Reply
from gateway.records import next_key_state as next_key_state
from gateway.text import escaped

if TYPE_CHECKING:  # for annotations only: the decisions never load the SDK
    from mcp_types import ClientCapabilities, ElicitResult


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
            Code.IDEMPOTENCY_KEY_REUSED,
            "This idempotencyKey was already used with a different plan. Use a new key for a new plan.",
        )
    if record.state == "in_flight":
        raise ToolError(
            Code.REQUEST_IN_PROGRESS,
            "A call with this idempotencyKey is still running. Retry it in a few seconds.",
        )
    if record.state == "error":
        raise ToolError(**stored_error(record))
    if record.state == "unknown":
        return AfterLookup.UNKNOWN
    return AfterLookup.REPLAY


def live_plan(found: Plan | Expired | None, caller: str, tool: str, preview: str) -> Plan:
    """Step 4: the plan exists, is live, belongs to this caller and is for this tool."""
    if isinstance(found, Expired):
        if found.caller == caller:
            raise ToolError(Code.PLAN_EXPIRED, f"This plan has expired. Call {preview} again.", next_tool=preview)
        found = None
    if found is None or found.caller != caller or found.tool != tool:
        raise ToolError(
            Code.PLAN_NOT_FOUND, f"No such plan for this caller. Call {preview} to get one.", next_tool=preview
        )
    return found


def plan_in_use(found: Plan | Expired | None, caller: str, tool: str, preview: str | None) -> ToolError:
    """Step 8: the claim found the plan (``found``, read again) gone or claimed, and the key free. A plan from a
    preview that is gone or expired says so; else another call with another key is carrying it out. (A write
    without a preview, ``preview`` None, stands on a plan its own arguments imply.)"""
    if preview is None:
        return ToolError(Code.REQUEST_IN_PROGRESS, "A call with these arguments is running. Retry in a few seconds.")
    try:
        live_plan(found, caller, tool, preview)
    except ToolError as gone:
        return gone
    return ToolError(Code.REQUEST_IN_PROGRESS, "Another call is applying this plan right now. Retry in a few seconds.")


def require_form(capabilities: ClientCapabilities | None) -> None:
    """Step 5: the client declared form elicitation (an empty ``elicitation: {}`` means form)."""
    elicitation = capabilities.elicitation if capabilities is not None else None
    if elicitation is None or (elicitation.form is None and elicitation.url is not None):
        raise ToolError(
            Code.CONFIRMATION_UNAVAILABLE,
            "This client cannot show a confirmation form, so the write will not run. Nothing was changed.",
            details={"needs": "elicitation.form"},
            authorization=authorization_denial(AVAILABLE, [confirmation_hint(["form"])]),
        )


@dataclass(frozen=True)
class Seen:
    """The target as a fresh read shows it: its id as the backend spells it, version, protection, and the
    numbers the plan states (lookups read afresh too)."""

    target_id: Any
    version: Any
    protected: bool
    summary: dict[str, Any]


def require_unchanged(plan: Plan, seen: Seen, preview: str, noun: str) -> None:
    """Steps 6 and 8: the target is still what the plan was made from, and every number the user is asked to
    confirm still holds."""
    if seen.protected:
        raise ToolError(
            Code.TARGET_PROTECTED, f"{plan.target} is protected; the gateway will not change it.", noun=noun
        )
    moved = [("version", plan.version, seen.version)] if seen.version != plan.version else []
    if seen.target_id != plan.target:
        moved.append(("id", plan.target, seen.target_id))
    moved += [
        (name, value, seen.summary.get(name)) for name, value in plan.summary.items() if seen.summary.get(name) != value
    ]
    if moved:
        name, planned, now = moved[0]
        shown = "gone" if now is MISSING or now is None else now
        raise ToolError(
            Code.PLAN_STALE,
            f"{plan.target} changed since the preview ({name} {planned} -> {shown}). Call {preview} again.",
            next_tool=preview,
        )


def question_text(template: str, plan: Plan, noun: str) -> str:
    """The confirmation question: the config's template with the plan's values filled in. Every string value
    (from the caller or the backend) is escaped, so no control, bidi or format character reaches a person."""
    names = {
        name: escaped(value) if isinstance(value, str) else value for name, value in template_names(plan, noun).items()
    }
    return str(render(template, names))


def template_names(plan: Plan, noun: str) -> dict[str, Any]:
    """What a confirmation message or a write payload may name."""
    return {**plan.arguments, **plan.summary, "target_id": plan.target, "version": plan.version, "noun": noun}


def confirmation_schema(mode: str, plan: Plan) -> dict[str, Any]:
    """The form: a boolean ``confirm``, or a typed ``confirmTarget`` that must equal the target id."""
    if mode == "typed":
        prop = {"type": "string", "title": f"Type {plan.target} to confirm", "maxLength": 128}
        return {"type": "object", "properties": {"confirmTarget": prop}, "required": ["confirmTarget"]}
    prop = {"type": "boolean", "title": "Apply this change"}
    return {"type": "object", "properties": {"confirm": prop}, "required": ["confirm"]}


def require_yes(answer: ElicitResult | None, mode: str, plan: Plan, preview: str | None = None) -> str:
    """Step 7: only an accepted, correctly filled form counts as yes. Returns the answer for the audit.
    ``preview`` names the tool that issues a new plan (none for a pass-through write, which has no preview)."""
    if answer is None:
        raise ToolError(Code.NOT_CONFIRMED, "No answer came before the prompt timed out. Nothing was changed.")
    content = answer.content or {}
    if answer.action == "accept":
        if mode == "typed" and content.get("confirmTarget") == plan.target:
            return "accept"
        if mode != "typed" and content.get("confirm") is True:
            return "accept"
        raise ToolError(Code.NOT_CONFIRMED, "The confirmation was not given as asked. Nothing was changed.")
    if preview is None:
        raise ToolError(Code.NOT_CONFIRMED, f"The user did not confirm ({answer.action}). Nothing was changed.")
    raise ToolError(
        Code.NOT_CONFIRMED,
        f"The user did not confirm ({answer.action}). Nothing was changed and this plan is used up: "
        f"call {preview} again only if the user asks for the change.",
        next_tool=preview,
    )


def uses_up_plan(answer: ElicitResult | None) -> bool:
    """Step 7: a decline or a cancel ends the plan, so the same plan never prompts again (consent fatigue);
    the agent must preview again. A timeout or a wrongly typed confirmation leaves it, as does any yes."""
    return answer is not None and answer.action in ("decline", "cancel")


LOST = None  # a backend call that was sent and never answered


@dataclass(frozen=True)
class Settlement:
    """Step 9's decision: the key's final state and what the caller is told."""

    state: KeyState
    result: dict[str, Any]

    def error(self) -> ToolError | None:
        """The refusal to raise, for states that are not applied."""
        return None if self.state == "applied" else ToolError(**self.result)


Fits = Callable[[str, Any], bool]
"""Whether a value may fill a field of the write tool's output (gateway.catalog.published.PublishedTool.fits)."""


def reported_version(reply: Reply | None, write: WriteTool, fits: Fits) -> Any:
    """The version the backend's answer reports after the write, or MISSING (also when it does not fit the
    declared version schema: ``"2"`` where an integer is declared is no version)."""
    if reply is LOST or reply.is_error or write.version_from is None:
        return MISSING
    version = at_path(write.call.data_of(reply), write.version_from)
    valid = isinstance(version, str | int) and not isinstance(version, bool) and fits("version", version)
    return version if valid else MISSING


def needs_reread(reply: Reply | None, write: WriteTool, fits: Fits) -> bool:
    """Whether settling this reply needs a fresh read of the target."""
    return reply is LOST or (not reply.is_error and reported_version(reply, write, fits) is MISSING)


def settle(
    plan: Plan,
    reply: Reply | None,
    current: dict[str, Any] | None,
    reread_version: Any,
    write: WriteTool,
    preview: str,
    fits: Fits,
) -> Settlement:
    """Step 9: the outcome of a sent write. A write that happened is never reported as a failure, and what is
    reported fits the tool's output schema."""
    if reply is not LOST and reply.is_error:
        message = f"The backend refused the write. Call {preview} again before retrying."
        return Settlement("error", {"code": Code.BACKEND_ERROR.value, "message": message, "next_tool": preview})
    base = {"planId": plan.plan_id, **plan.arguments, **plan.summary}
    version = reported_version(reply, write, fits)
    if version is not MISSING:
        data = write.call.data_of(reply) if reply is not LOST else MISSING
        return Settlement("applied", {**base, **_reported(write, data, plan, fits), "version": version})
    moved = reread_version is not MISSING and reread_version != plan.version and fits("version", reread_version)
    if reply is not LOST and moved:
        return Settlement("applied", {**base, "version": reread_version})
    return Settlement("unknown", outcome_unknown_body(current))


def _reported(write: WriteTool, data: Any, plan: Plan, fits: Fits) -> dict[str, Any]:
    """Summary values the backend reported after the write, where they have the planned value's type and fit."""
    reported = {}
    for field, path in write.result.items():
        value = at_path(data, path)
        if type(value) is type(plan.summary.get(field)) and fits(field, value):
            reported[field] = value
    return reported


def outcome_unknown_body(current: dict[str, Any] | None) -> dict[str, Any]:
    """The outcome_unknown refusal, carrying the target as it reads now (or null)."""
    return {
        "code": Code.OUTCOME_UNKNOWN.value,
        "message": "The backend did not confirm whether the write happened. This key will never write again; "
        "check details.current, and preview again with a new key only if the change is still needed.",
        "details": {"current": current},
    }


def stored_error(record: KeyRecord) -> dict[str, Any]:
    """The ToolError arguments a settled error record replays."""
    body = dict(record.result or {})
    return {
        "code": body.get("code", Code.BACKEND_ERROR.value),
        "message": body.get("message", "The earlier call with this key failed."),
        "next_tool": body.get("next_tool"),
        "details": body.get("details"),
    }
