"""Every audit entry, made by the constructor of its outcome: no entry is put together anywhere else.

    outcome        constructor        made by
    applied        applied            a write that ran (gateway.write.driver), stored with its key's outcome
    replayed       replayed           a retry of a finished key, answered from its record
    unknown        unknown            a write whose effect cannot be told, or a refusal that carries outcome_unknown
                   recovered          a key a crash left in flight, at the next ``serve`` (gateway.audit.trail)
    backend_error  backend_error      the backend refused a sent write
    refused        refused            any other refusal, with the code the caller saw
                   repeated           the refusals of one minute counted instead of stored (gateway.audit.floods)
    denied         denied             a ``deny`` rule refused a preview (gateway.write.choice)
    proposed       proposed           a url-mode write's approval made: the plan and the question as shown
                                      (gateway.write.ask.people)
    approval       approval           one person's decision on the approval page (gateway.http.page.decisions)
    returned       returned           what the caller of a write people approved was answered, after its
                                      executed entry (applied, unknown, backend_error; gateway.write.driver)
    cancelled      cancelled          a task cancelled before its write could run (gateway.mcp.tasks)
    passkey        passkey            a passkey enrolled on the page or revoked by an operator, with its public
                                      key (gateway.http.page.passkeys, gateway.cli.approvals)
    trimmed        trimmed            ``audit trim``'s checkpoint (gateway.audit.chain)

A write's call learns its facts as it goes (``Facts``: the plan, the key, the target, versions, the answer and
what decided its mode) and takes its entry once, when its outcome is known: ``refusal`` picks the constructor a
refusal's code calls for. An event about an approval (``approval``) takes its facts from the approval itself
(``_about``), as any later event about one can. ``OUTCOMES`` says what each outcome records, in the words of
docs/audit.md's table (``markdown_table``; tests/unit/test_audit_entries.py holds the two, and every
constructor's outcome, equal).

Pure: records and error codes only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from gateway.errors import Code, ToolError
from gateway.records import Approval, AuditEntry, KeyRecord, Passkey, Task

APPLIED = "applied"
REPLAYED = "replayed"
UNKNOWN = "unknown"
BACKEND_ERROR = "backend_error"
REFUSED = "refused"
DENIED = "denied"
APPROVAL = "approval"
PROPOSED = "proposed"
RETURNED = "returned"
CANCELLED = "cancelled"
PASSKEY = "passkey"
TRIMMED = "trimmed"

OUTCOMES = {
    APPLIED: "a write ran: the backend's answer, stored in the same step as the key's outcome (`version_after`;"
    " `extra.approvers` when people approved it on the page)",
    REPLAYED: "a retry with a finished key, answered from its record: no prompt, no backend call",
    UNKNOWN: "a write that may have reached the backend without the gateway being able to tell what it did (`code`"
    " outcome_unknown; a retry with the key says so again), or a key a crash left in flight, audited at the next"
    " `serve` (`extra.recovered`)",
    BACKEND_ERROR: "the backend refused a sent write (`code` backend_error); a retry with the key replays it",
    REFUSED: "any other refusal, with the code the caller saw (`code`); a flood of refusals before a plan is one"
    " entry per caller, tool, code and minute, then one with `extra.repeats`",
    DENIED: "a `deny` rule refused a preview: no plan was issued (`extra.rule`; `extra.mode` deny). A deny at write"
    " time is `refused` with the code `denied`",
    PROPOSED: "a url-mode write asked people for approval: the plan and the question exactly as the page shows it"
    " (`extra.question`, `extra.factsDigest`)",
    APPROVAL: "one person's decision on the approval page (`confirmation` approve or reject, `extra.approver`)",
    RETURNED: "what the caller of a write people approved was answered, after the entry of the backend call"
    " (`applied`, `unknown`, `backend_error`): `code`, or none for a result (`extra.answered`)",
    CANCELLED: "a url-mode write's task cancelled before people decided (a tool-approval task: before its write was"
    " claimed): its plan and its approval ended, nothing was written (`target`, `extra.task`, `extra.why`)",
    PASSKEY: "a passkey enrolled by a person on the approval page, or revoked by an operator (`confirmation`"
    " enrolled or revoked): `extra.credentialId`, `extra.publicKey` (COSE, base64url), `extra.approver`; `audit"
    " verify` checks signed approvals with the keys these entries hold",
    TRIMMED: "`audit trim`'s checkpoint: the seq and hash of the last entry it deleted (`extra.trimmed_through`,"
    " `extra.trimmed_head`)",
}
"""What each outcome records, as docs/audit.md's table says it."""

RECOVERED = "in flight when the gateway stopped"


@dataclass(frozen=True)
class Facts:
    """What a write's entry says of its call, learnt along the way; the outcome, its code and time come last."""

    caller: str
    tool: str
    plan_id: str | None = None
    idempotency_key: str | None = None
    target: str | None = None
    version_before: Any = None
    version_after: Any = None
    confirmation: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


Outcome = Callable[[Facts, float], AuditEntry]
"""A constructor that takes a call's facts and the time: how a write's call is handed the entry of its outcome."""


def _of(facts: Facts, at: float, outcome: str, code: str | None = None) -> AuditEntry:
    return AuditEntry(
        at=at,
        caller=facts.caller,
        tool=facts.tool,
        outcome=outcome,
        plan_id=facts.plan_id,
        idempotency_key=facts.idempotency_key,
        target=facts.target,
        version_before=facts.version_before,
        version_after=facts.version_after,
        confirmation=facts.confirmation,
        code=code,
        extra=facts.extra,
    )


def applied(facts: Facts, at: float) -> AuditEntry:
    """A write that ran."""
    return _of(facts, at, APPLIED)


def replayed(facts: Facts, at: float) -> AuditEntry:
    """A retry of a finished key, answered from its record."""
    return _of(facts, at, REPLAYED)


def unknown(facts: Facts, at: float) -> AuditEntry:
    """A write whose effect the gateway cannot tell."""
    return _of(facts, at, UNKNOWN, Code.OUTCOME_UNKNOWN.value)


def backend_error(facts: Facts, at: float) -> AuditEntry:
    """The backend refused a sent write."""
    return _of(facts, at, BACKEND_ERROR, Code.BACKEND_ERROR.value)


def refused(facts: Facts, at: float, code: str) -> AuditEntry:
    """A refusal, with the code as the caller saw it (``ToolError.wire_code``)."""
    return _of(facts, at, REFUSED, code)


def refusal(facts: Facts, at: float, error: ToolError) -> AuditEntry:
    """The entry of a call answered with ``error``: unknown, backend_error, or refused with its code."""
    if error.code is Code.OUTCOME_UNKNOWN:
        return unknown(facts, at)
    if error.code is Code.BACKEND_ERROR:
        return backend_error(facts, at)
    return refused(facts, at, error.wire_code)


def recovered(record: KeyRecord, at: float) -> AuditEntry:
    """A key a crash left in flight: its outcome is unknown, the write may have reached the backend."""
    facts = Facts(
        record.caller,
        record.tool or "(unknown)",
        plan_id=record.plan_id,
        idempotency_key=record.key,
        target=record.target,
        version_before=record.version_before,
        extra={"recovered": RECOVERED},
    )
    return unknown(facts, at)


def repeated(first: AuditEntry, repeats: int, minute: int) -> AuditEntry:
    """How many more refusals like ``first`` came in its minute (``minute`` since the epoch) than were stored."""
    start = datetime.fromtimestamp(minute * 60, UTC).strftime("%Y-%m-%dT%H:%MZ")
    return replace(
        first,
        at=minute * 60 + 59.999,
        outcome=REFUSED,
        plan_id=None,
        idempotency_key=None,
        confirmation=None,
        extra={"repeats": repeats, "minute": start},
    )


def denied(at: float, caller: str, tool: str, target: str, rule: str | None) -> AuditEntry:
    """A preview refused by the ``deny`` rule ``rule``: no plan was issued."""
    return _of(Facts(caller, tool, target=target, extra={"mode": "deny", "rule": rule}), at, DENIED)


def _about(approval: Approval, at: float, outcome: str, confirmation: str | None, **extra: Any) -> AuditEntry:
    """An entry about an approval: its caller, tool, plan, target and version, the mode and rule that asked for
    people, then ``extra``, then the approval's id."""
    rule = {"rule": approval.rule} if approval.rule is not None else {}
    digest = {"factsDigest": approval.digest} if approval.digest is not None else {}
    facts = Facts(
        approval.caller,
        approval.tool,
        plan_id=approval.plan_id,
        target=approval.target,
        version_before=approval.version,
        confirmation=confirmation,
        extra={"mode": "url", **rule, **extra, **digest, "approval": approval.approval_id},
    )
    return _of(facts, at, outcome)


def approval(approval: Approval, at: float, approver: dict[str, Any], verdict: str, **evidence: Any) -> AuditEntry:
    """One person's decision on the page (``approver``: gateway.identity.person.audited; ``evidence``: the passkey
    assertion it was signed with)."""
    return _about(approval, at, APPROVAL, verdict, approver=approver, **evidence)


def proposed(approval: Approval, at: float) -> AuditEntry:
    """A url-mode write's approval made: the first of its events (the question as the page shows it)."""
    facts = {"facts": approval.facts} if approval.facts is not None else {}
    return _about(approval, at, PROPOSED, None, question=approval.message, **facts)


def returned(facts: Facts, at: float, code: str | None) -> AuditEntry:
    """What the caller of an approved write was answered (``code``; None for a result), after its executed entry."""
    return _of(replace(facts, extra={**facts.extra, "answered": code or "result"}), at, RETURNED, code)


def cancelled(task: Task, at: float, why: str, target: str | None) -> AuditEntry:
    """A task cancelled before people decided; ``target`` the one its approval names."""
    facts = Facts(
        task.caller,
        task.tool,
        plan_id=task.plan_id,
        idempotency_key=task.key,
        target=target,
        extra={"task": task.task_id, "why": why},
    )
    return _of(facts, at, CANCELLED)


def passkey(key: Passkey, at: float, event: str, approver: dict[str, Any]) -> AuditEntry:
    """A passkey ``enrolled`` or ``revoked`` (``approver``: its person as gateway.identity.person.audited keeps
    them), with the public key signatures are checked against."""
    extra = {"credentialId": key.credential_id, "publicKey": key.public_key, "label": key.label, "approver": approver}
    by = "(approval page)" if event == "enrolled" else "(operator)"
    return _of(Facts(by, "approvals passkeys", confirmation=event, extra=extra), at, PASSKEY)


def trimmed(last_trimmed: AuditEntry, count: int, before: float, at: float) -> AuditEntry:
    """``audit trim``'s checkpoint: which entries it deleted (``count``, those before ``before``), ending with
    which hash."""
    extra = {
        "trimmed_through": last_trimmed.seq,
        "trimmed_head": last_trimmed.hash,
        "trimmed_entries": count,
        "before": before,
    }
    return _of(Facts("(operator)", "audit trim", extra=extra), at, TRIMMED)


def markdown_table() -> str:
    """docs/audit.md's table of outcomes, one row per outcome."""
    rows = ["| outcome | what it records |", "| --- | --- |"]
    rows += [f"| `{outcome}` | {meaning[0].upper()}{meaning[1:]}. |" for outcome, meaning in OUTCOMES.items()]
    return "\n".join(rows)


if __name__ == "__main__":  # python -m gateway.audit.entries: docs/audit.md's table of outcomes
    print(markdown_table())
