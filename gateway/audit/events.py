"""The events of a write that waited for people, checked together: what ``audit verify`` adds to the chain.

A url-mode write leaves, in this order and sharing one ``factsDigest`` (gateway.approvals.digest):

    proposed   the approval made: the plan and the question as the page shows it
    approval   each person's decision (approve or reject)
    executed   the backend call's entry: applied, unknown or backend_error, confirmed ``approved``
    returned   what the caller was answered

``problems`` names every plan whose events disagree: a digest that differs between them, a write executed with
no approval before it, or events out of order. Events of other calls with the same plan (an ``approval_pending``
refusal, a replay) are not among these four and are not checked. Pure.
"""

from __future__ import annotations

from collections import defaultdict

from gateway.audit import entries
from gateway.records import AuditEntry

EXECUTED = frozenset({entries.APPLIED, entries.UNKNOWN, entries.BACKEND_ERROR})
ORDER = {entries.PROPOSED: 0, entries.APPROVAL: 1, "executed": 2, entries.RETURNED: 3}


def kind_of(entry: AuditEntry) -> str | None:
    """Which of the four events an entry is, or None."""
    if entry.outcome in (entries.PROPOSED, entries.APPROVAL, entries.RETURNED):
        return entry.outcome
    if entry.outcome in EXECUTED and entry.confirmation == "approved":
        return "executed"
    return None


def problems(trail: list[AuditEntry]) -> list[str]:
    """What is wrong with the events of each plan that asked people (those with a ``proposed`` entry)."""
    by_plan: dict[str, list[tuple[str, AuditEntry]]] = defaultdict(list)
    for entry in trail:
        kind = kind_of(entry)
        if kind is not None and entry.plan_id is not None:
            by_plan[entry.plan_id].append((kind, entry))
    found = []
    for plan_id, events in by_plan.items():
        kinds = [kind for kind, _ in events]
        if entries.PROPOSED not in kinds:
            continue  # asked before this gateway recorded proposals (or trimmed away): nothing to hold together
        digests = {entry.extra.get("factsDigest") for _, entry in events}
        if len(digests) != 1 or None in digests:
            found.append(f"plan {plan_id}: its events do not share one facts digest ({len(digests)} seen)")
        if [ORDER[kind] for kind in kinds] != sorted(ORDER[kind] for kind in kinds):
            found.append(f"plan {plan_id}: its events are out of order ({', '.join(kinds)})")
        approvals = [entry for kind, entry in events if kind == entries.APPROVAL and entry.confirmation == "approve"]
        if "executed" in kinds and not approvals:
            found.append(f"plan {plan_id}: the write was executed with no approval before it")
    return found
