"""The audit trail: one entry per write decision, hash-chained so that an edit, a deletion or a reordering
shows.

Each stored entry carries ``seq`` (1, 2, 3, …), ``prev_hash`` (the previous entry's hash, "" for the first) and
``hash`` = SHA-256 over the entry's fields and ``prev_hash``. ``verify`` recomputes the chain and names the first
entry that does not fit. Truncating the newest entries leaves a shorter chain that is still intact: record the
head hash ``verify`` prints somewhere else if that matters.
"""

from __future__ import annotations

from datetime import UTC, datetime

from gateway.stores.base import AuditEntry
from gateway.stores.chain import digest


def verify(entries: list[AuditEntry]) -> list[str]:
    """Every break in the chain, as sentences; empty when the trail is intact."""
    problems: list[str] = []
    previous_hash, expected_seq = "", 1
    for entry in entries:
        if entry.seq != expected_seq:
            if entry.seq > expected_seq:
                problems.append(f"entries {expected_seq}..{entry.seq - 1} are missing (deleted)")
            else:
                problems.append(f"entry {entry.seq} appears after entry {expected_seq - 1} (reordered or duplicated)")
        if entry.hash != digest(entry, entry.prev_hash):
            problems.append(f"entry {entry.seq} does not match its hash (edited)")
        elif entry.prev_hash != previous_hash:
            problems.append(f"entry {entry.seq} does not follow the entry before it (deleted or reordered)")
        previous_hash, expected_seq = entry.hash, entry.seq + 1
    return problems


def when(entry: AuditEntry) -> str:
    """The entry's time in RFC 3339 UTC."""
    return datetime.fromtimestamp(entry.at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def matches(entry: AuditEntry, *, target: str | None, caller: str | None, since: float | None) -> bool:
    """Whether an entry passes the ``audit list`` filters."""
    return (
        (target is None or entry.target == target)
        and (caller is None or entry.caller == caller)
        and (since is None or entry.at >= since)
    )


def table(entries: list[AuditEntry]) -> str:
    """Entries as aligned columns, oldest first."""
    rows = [("seq", "time", "caller", "tool", "target", "outcome", "version", "answer", "key")]
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
                when(entry),
                entry.caller,
                entry.tool,
                entry.target or "",
                outcome,
                version,
                entry.confirmation or "",
                entry.idempotency_key or "",
            )
        )
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows
    )
