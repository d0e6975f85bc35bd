"""Outcomes the store could not take yet, kept in this process until it can.

A write's outcome is stored with its audit entry in one step (``Store.settle(record, entry)``, through
gateway.audit.trail). If the store fails there (a SQLite file locked by another connection or full, a Redis that
stopped answering), the write still happened: the caller is told so, and the settled record is kept here with its
entry. Every later write call first stores what is kept, so the caller's retry, once the store works again,
replays the write instead of reading request_in_progress until a restart; a retry while it still fails is
answered from the kept record. The entry goes with the record, so however many tries it takes, the store holds
it once. Only this process knows them: one that dies with outcomes kept leaves their keys in flight, and start-up
recovery settles those unknown with an entry of their own, as after any crash. A Redis store settles only a key
whose lock is still held by its claim, so there a kept outcome's entry is stored by the retry and the key lapses
to unknown with the lock; the PostgreSQL store remembers the claims it made, so there the retry settles the key.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from gateway.audit import trail
from gateway.crashpoints import crash_point
from gateway.records import AuditEntry, KeyRecord
from gateway.stores.base import Store

log = logging.getLogger(__name__)


@dataclass
class Unsettled:
    """Settled key records and their audit entries the store has not taken yet, by (caller, idempotency key)."""

    kept: dict[tuple[str, str], tuple[KeyRecord, AuditEntry | None]] = field(default_factory=dict)

    def record(self, caller: str, key: str) -> KeyRecord | None:
        """The settled record kept for a key, if its settle has not reached the store yet."""
        found = self.kept.get((caller, key))
        return None if found is None else found[0]

    async def put(self, store: Store, record: KeyRecord, entry: AuditEntry | None) -> None:
        """Settle the key with its entry; keep both if the store does not take them."""
        crash_point("before-settle")
        if not await _settle(store, record, entry):
            self.kept[(record.caller, record.key)] = (record, entry)

    async def retry(self, store: Store) -> None:
        """Store what is kept; keep what still fails. Concurrent callers never store one outcome twice."""
        if not self.kept:
            return
        kept, self.kept = self.kept, {}
        for where, (record, entry) in kept.items():
            if not await _settle(store, record, entry):
                self.kept[where] = (record, entry)


async def _settle(store: Store, record: KeyRecord, entry: AuditEntry | None) -> bool:
    """True once the store took the outcome and its entry (both or neither: Store.settle)."""
    try:
        await trail.settle(store, record, entry)
    except Exception as exc:
        log.error(
            "outcome %s of key %s kept until the store takes it: %s", record.state, record.key, type(exc).__name__
        )
        return False
    return True
