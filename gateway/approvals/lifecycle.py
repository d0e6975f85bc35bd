"""The pure rules of an approval: its state, what a decision does, and the facts it is bound to.

state      pending -> approved   when ``approvers_needed`` distinct people approved, none rejected
           pending -> rejected   when anyone rejected (Reject ends the plan)
           pending -> cancelled  when the caller cancelled the write (``tasks/cancel``: ``cancel``), which also
           approved -> cancelled ends the plan; approved only until the write is claimed (gateway.mcp.tasks)
           any     -> expired    once ``expires_at`` passed (the plan's own expiry)
shown      what the page says: waiting, approved (for the agent's retry), applied, not applied, rejected,
           cancelled, expired
decide     adds one person's verdict; approving twice is idempotent; a settled approval takes no new
           verdict (a cancelled one neither); with ``four_eyes`` the caller cannot decide their own write
facts      an approval as JSON, the same in a webhook's notice and in the approval page's JSON API
url        where an approval's page is: the one spelling of a link that reaches prompts, webhooks and the page
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import replace
from enum import StrEnum
from typing import Any, Literal
from urllib.parse import quote

from gateway.identity.person import audited
from gateway.identity.principal import readable
from gateway.records import Approval, Decision, Plan
from gateway.text import rfc3339

WAIT_META = "mcp-safety-gateway/approval"
"""The ``_meta`` key a url elicitation carries its wait in (gateway/write/ask/people.py sends it, the terminal client
reads it): ``approvalId``, ``expiresAt`` and ``waitsUntil`` (RFC 3339 UTC)."""


class State(StrEnum):
    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"
    CANCELLED = "cancelled"
    EXPIRED = "expired"


class Refused(StrEnum):
    """Why a decision was not taken."""

    EXPIRED = "expired"
    SETTLED = "settled"
    CANCELLED = "cancelled"
    OWN_WRITE = "own_write"
    CHANGED_MIND = "changed_mind"
    NOT_AN_APPROVER = "not_an_approver"
    UNSIGNED = "unsigned"
    """Passkeys are required and the decision carries no signature, or one that does not hold."""


class DecisionRefused(Exception):
    """A decision the rules do not take, with the reason."""

    def __init__(self, reason: Refused) -> None:
        super().__init__(reason.value)
        self.reason = reason


def approval_id_for(plan_id: str) -> str:
    """The approval's id for a plan: derived, so every replica finds it without a lookup, and not the plan id
    itself (the link travels through browsers, chats and e-mail)."""
    digest = hashlib.sha256(b"gateway/approval/v1:" + plan_id.encode()).digest()
    return "ap_" + base64.urlsafe_b64encode(digest).decode().rstrip("=")[:22]


def approval_url(base: str, approval_id: str) -> str:
    """The approval's page under ``base`` (the page's public address, or "" for a path on the page itself)."""
    return f"{base}/approvals/{quote(approval_id, safe='')}"


def new_approval(
    plan: Plan,
    caller_person: str | None,
    message: str,
    now: float,
    *,
    needed: int,
    four_eyes: bool,
    rule: str | None = None,
    caller_display: str | None = None,
    target_name: str | None = None,
    digest: str | None = None,
    facts: dict[str, Any] | None = None,
) -> Approval:
    """The approval a url-mode write asks for: the plan's facts, open until the plan expires."""
    return Approval(
        digest=digest,
        facts=facts,
        caller_display=caller_display,
        target_name=target_name,
        approval_id=approval_id_for(plan.plan_id),
        plan_id=plan.plan_id,
        caller=plan.caller,
        caller_person=caller_person,
        tool=plan.tool,
        target=plan.target,
        version=plan.version,
        arguments=dict(plan.arguments),
        summary=dict(plan.summary),
        message=message,
        requested_at=now,
        expires_at=plan.expires_at,
        approvers_needed=needed,
        four_eyes=four_eyes,
        rule=rule,
    )


def state(approval: Approval, now: float) -> State:
    """Where an approval stands now."""
    if any(decision.verdict == "reject" for decision in approval.decisions):
        return State.REJECTED
    if approval.cancelled_at is not None:
        return State.CANCELLED
    if len(approved_by(approval)) >= approval.approvers_needed:
        return State.APPROVED
    if now >= approval.expires_at:
        return State.EXPIRED
    return State.PENDING


class Shown(StrEnum):
    """Where a write stands as the page shows it: its approval's state and, once approved, what became of it."""

    WAITING = "waiting"
    """Nobody has decided yet (the approval is pending)."""
    APPROVED = "approved"
    """Approved; no call of the agent waits on it now: it runs when the agent retries with the same key."""
    RUNNING = "running"
    """Approved, and a call of the agent waits on it (``waits_until``): the write runs now."""
    APPLIED = "applied"
    """Approved, and the write ran."""
    NOT_APPLIED = "not_applied"
    """Approved, and then refused or failed: the result's outcome and code say how."""
    REJECTED = "rejected"
    CANCELLED = "cancelled"
    """The caller cancelled the write (``tasks/cancel``) before it ran: nothing was written."""
    EXPIRED = "expired"
    """Nobody decided in time, or it was approved and not used before the plan expired: nothing was written."""


def shown(approval: Approval, now: float) -> Shown:
    """Where a write stands, for the page: the approval's state, then what the write path recorded."""
    current = state(approval, now)
    if current is State.PENDING:
        return Shown.WAITING
    if current is State.REJECTED:
        return Shown.REJECTED
    if current is State.CANCELLED:
        return Shown.CANCELLED
    if current is State.EXPIRED:
        return Shown.EXPIRED
    result = approval.result
    if result is None:
        if now >= approval.expires_at:
            return Shown.EXPIRED
        return Shown.RUNNING if approval.waits_until is not None and now < approval.waits_until else Shown.APPROVED
    return Shown.APPLIED if result.get("outcome") == "applied" else Shown.NOT_APPLIED


def with_result(approval: Approval, outcome: str, code: str | None, version: Any, now: float) -> Approval:
    """The approval with what became of its write (the latest call's outcome replaces an earlier one)."""
    return replace(approval, result={"outcome": outcome, "code": code, "version": version, "at": now})


def approved_by(approval: Approval) -> list[str]:
    """The names of the people who approved, in order."""
    return [decision.name for decision in approval.decisions if decision.verdict == "approve"]


def approvers_of(approval: Approval) -> list[dict[str, Any]]:
    """The people who approved, in order, as the audit keeps them: (issuer, subject), what was shown beside, and
    the passkey each signed with (its credential id; the assertion is in their ``approval`` entry)."""
    return [
        {**audited(decision.approver, decision.name), **_signed_with(decision)}
        for decision in approval.decisions
        if decision.verdict == "approve"
    ]


def _signed_with(decision: Decision) -> dict[str, str]:
    return {"passkey": decision.assertion["credentialId"]} if decision.assertion else {}


def may_decide(approval: Approval, approver: str) -> bool:
    """Whether this person may decide this approval at all (four eyes: never their own write)."""
    return not (approval.four_eyes and approval.caller_person is not None and approver == approval.caller_person)


def decide(
    approval: Approval,
    approver: str,
    name: str,
    verdict: Literal["approve", "reject"],
    now: float,
    assertion: dict[str, str] | None = None,
) -> Approval:
    """The approval after one person's verdict (with the passkey assertion it was signed with, if any);
    DecisionRefused when the rules do not take it."""
    if not may_decide(approval, approver):
        raise DecisionRefused(Refused.OWN_WRITE)
    if approval.cancelled_at is not None:
        raise DecisionRefused(Refused.CANCELLED)
    earlier = next((decision for decision in approval.decisions if decision.approver == approver), None)
    if earlier is not None:
        if earlier.verdict == verdict:
            return approval  # approving (or rejecting) twice is the same decision
        raise DecisionRefused(Refused.CHANGED_MIND)
    current = state(approval, now)
    if current is State.EXPIRED:
        raise DecisionRefused(Refused.EXPIRED)
    if current is not State.PENDING:
        raise DecisionRefused(Refused.SETTLED)
    return replace(approval, decisions=(*approval.decisions, Decision(approver, name, verdict, now, assertion)))


def cancel(approval: Approval, now: float) -> Approval:
    """The approval ended by its caller's cancel: pending or approved (not yet claimed) becomes cancelled; one
    already rejected, cancelled or expired stays as it is."""
    if state(approval, now) not in (State.PENDING, State.APPROVED):
        return approval
    return replace(approval, cancelled_at=now)


def binds(approval: Approval, plan: Plan) -> bool:
    """Whether the approval was given for exactly this plan's facts."""
    return (
        approval.approval_id == approval_id_for(plan.plan_id)
        and approval.plan_id == plan.plan_id
        and approval.caller == plan.caller
        and approval.tool == plan.tool
        and approval.target == plan.target
        and approval.version == plan.version
        and approval.arguments == plan.arguments
        and approval.summary == plan.summary
        and approval.expires_at == plan.expires_at
    )


def approval_facts(approval: Approval, url: str) -> dict[str, Any]:
    """An approval's facts as JSON, the same in a webhook's notice and in the approval page's JSON API."""
    return {
        "approvalId": approval.approval_id,
        "url": url,
        "tool": approval.tool,
        "target": approval.target,
        "targetName": approval.target_name,
        "version": approval.version,
        "arguments": approval.arguments,
        "summary": approval.summary,
        "caller": readable(approval.caller),
        "question": approval.message,
        "approversNeeded": approval.approvers_needed,
        "fourEyes": approval.four_eyes,
        "requestedAt": rfc3339(approval.requested_at),
        "expiresAt": rfc3339(approval.expires_at),
    }
