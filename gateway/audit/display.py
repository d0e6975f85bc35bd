"""The audit trail as an operator reads it: ``audit list``'s filters and table."""

from __future__ import annotations

import dataclasses
from typing import Any

from gateway.identity.person import readable_person
from gateway.identity.principal import readable
from gateway.records import AuditEntry
from gateway.text import columns, rfc3339


def entry_json(entry: AuditEntry) -> dict[str, Any]:
    """An entry as one JSON object, its time in RFC 3339 UTC (``audit list --json``, the audit stream)."""
    return {**dataclasses.asdict(entry), "at": rfc3339(entry.at)}


def matches(
    entry: AuditEntry, *, target: str | None, caller: str | None, since: float | None, plan: str | None = None
) -> bool:
    """Whether an entry passes the ``audit list`` filters (a caller as stored, or as the table shows it)."""
    return (
        (target is None or entry.target == target)
        and (plan is None or entry.plan_id == plan)
        and (caller is None or caller in (entry.caller, readable(entry.caller)))
        and (since is None or entry.at >= since)
    )


def rule_of(entry: AuditEntry) -> str:
    """The approval rule that decided the entry's mode (and the one that failed closed, if any)."""
    rule, unevaluable = entry.extra.get("rule"), entry.extra.get("unevaluable")
    named = [str(rule)] if rule else []
    return " ".join(named + ([f"unevaluable:{unevaluable}"] if unevaluable else []))


def people_of(entry: AuditEntry) -> str:
    """Who decided: an approval's approver, or the people who approved an applied write, each as (issuer, subject)
    with the verified email or display claim beside it."""
    people = entry.extra.get("approvers", [entry.extra["approver"]] if "approver" in entry.extra else [])
    return ", ".join(readable_person(person) for person in people) if isinstance(people, list) else ""


def table(entries: list[AuditEntry]) -> str:
    """Entries as aligned columns, oldest first, every cell escaped (gateway.text)."""
    rows = [("seq", "time", "caller", "tool", "target", "outcome", "version", "answer", "by", "rule", "key")]
    for entry in entries:
        outcome = (
            entry.outcome if entry.code is None or entry.code == entry.outcome else f"{entry.outcome}:{entry.code}"
        )
        version = "" if entry.version_before is None else f"{entry.version_before}"
        if entry.version_after is not None:
            version += f"->{entry.version_after}"
        rows.append(
            (
                str(entry.seq),
                rfc3339(entry.at),
                readable(entry.caller),
                entry.tool,
                entry.target or "",
                outcome,
                version,
                entry.confirmation or "",
                people_of(entry),
                rule_of(entry),
                entry.idempotency_key or "",
            )
        )
    return columns(rows)
