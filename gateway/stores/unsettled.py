"""Outcomes the store could not take yet, kept in this process until it can.

A write's outcome is audited, then its key settled. If the store fails at either step (a SQLite file locked by
another process or full, a Redis that stopped answering), the write still happened: the caller is told so, and the
entry and the settled record are kept here. Every later write call first stores what is kept, so the caller's
retry, once the store works again, replays the write instead of reading request_in_progress until a restart; a
retry while it still fails is answered from the kept record. Only this process knows them: one that dies with
outcomes kept leaves their keys in flight, and start-up recovery settles those unknown, as after any crash. A
Redis store settles only a key whose lock is still held by its claim, so there a kept outcome lapses to unknown
with the lock instead.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from gateway.chaos import crash_point
from gateway.records import AuditEntry, KeyRecord
from gateway.stores.base import Store

log = logging.getLogger(__name__)


@dataclass
class Unsettled:
    """Audit entries and settled key records the store has not taken yet, by (caller, idempotency key)."""

    kept: dict[tuple[str, str], tuple[AuditEntry | None, KeyRecord | None]] = field(default_factory=dict)

    def record(self, caller: str, key: str) -> KeyRecord | None:
        """The settled record kept for a key, if its settle has not reached the store yet."""
        return self.kept.get((caller, key), (None, None))[1]

    async def put(self, store: Store, entry: AuditEntry | None, record: KeyRecord) -> None:
        """Append the entry, then settle the key; keep whichever the store does not take."""
        if entry is not None:
            entry = await _append(store, entry)
        crash_point("before-settle")
        settled = await _settle(store, record)
        if entry is not None or not settled:
            self.kept[(record.caller, record.key)] = (entry, None if settled else record)

    async def retry(self, store: Store) -> None:
        """Store what is kept; keep what still fails. Concurrent callers never store one outcome twice."""
        if not self.kept:
            return
        kept, self.kept = self.kept, {}
        for where, (entry, record) in kept.items():
            if entry is not None:
                entry = await _append(store, entry)
            settled = record is None or await _settle(store, record)
            if entry is not None or not settled:
                self.kept[where] = (entry, None if settled else record)


async def _append(store: Store, entry: AuditEntry) -> AuditEntry | None:
    """None once appended; the entry itself while the store refuses it."""
    try:
        await store.append_audit(entry)
    except Exception as exc:
        log.error("audit entry kept until the store takes it (%s): %s", type(exc).__name__, entry)
        return entry
    return None


async def _settle(store: Store, record: KeyRecord) -> bool:
    try:
        await store.settle(record)
    except Exception as exc:
        log.error(
            "outcome %s of key %s kept until the store takes it: %s", record.state, record.key, type(exc).__name__
        )
        return False
    return True
