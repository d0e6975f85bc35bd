"""Refusals that never reached a plan, audited per caller, tool, code and minute instead of one row each.

One caller looping on a bad plan id or past its rate limit could add a thousand rows in seconds and bury the
writes an operator looks for. A refusal with no target (rate_limited, invalid_arguments, request_too_large,
forbidden, plan_not_found, plan_expired: nothing was looked up for it) is a *flood candidate*: the first one of
its (caller, tool, code, minute) is stored as usual, the rest of that minute only counted, and once the minute is
over one entry says how many more there were (``outcome`` "refused", the same code, ``extra.repeats``,
``extra.minute``). Refusals that reached a plan or a key, and every write, are stored one by one as before.

Counts are held in the process: they are handed out when a later refusal or entry comes along after their
minute, and when the gateway closes. A process killed hard loses at most the counts of its last minutes; the
first refusal of each is already stored. Pure: no I/O; gateway.write.planned stores what this hands out.
"""

from __future__ import annotations

from gateway.audit.entries import REFUSED, repeated
from gateway.records import AuditEntry

Bucket = tuple[str, str, str | None, int]
"""(caller, tool, code, minute since the epoch)"""


def is_flood_candidate(entry: AuditEntry) -> bool:
    """A refusal that never reached a plan or a key."""
    return entry.outcome == REFUSED and entry.target is None


class RefusalCounter:
    """Per-minute counts of repeated refusals, and the entries that report them."""

    def __init__(self) -> None:
        self._repeats: dict[Bucket, tuple[AuditEntry, int]] = {}

    def admit(self, entry: AuditEntry) -> bool:
        """Whether to store this refusal now (the first of its bucket); otherwise it is counted."""
        bucket = (entry.caller, entry.tool, entry.code, int(entry.at // 60))
        found = self._repeats.get(bucket)
        if found is None:
            self._repeats[bucket] = (entry, 0)
            return True
        self._repeats[bucket] = (found[0], found[1] + 1)
        return False

    def due(self, now: float | None = None) -> list[AuditEntry]:
        """The report of every bucket whose minute is over (every bucket when ``now`` is None), oldest first;
        buckets whose only refusal was stored are dropped silently."""
        minute_now = None if now is None else int(now // 60)
        done = [bucket for bucket in self._repeats if minute_now is None or bucket[3] < minute_now]
        reports = []
        for bucket in sorted(done, key=lambda b: b[3]):
            first, repeats = self._repeats.pop(bucket)
            if repeats:
                reports.append(repeated(first, repeats, bucket[3]))
        return reports
