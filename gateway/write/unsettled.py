"""Outcomes the store could not take yet, kept in this process until it can.

A write's outcome is stored with its audit entry in one step (``Store.settle(record, entry)``, through
gateway.audit.trail). If the store fails there (a SQLite file locked by another connection or full, a Redis that
stopped answering), the write still happened: the caller is told so, and the settled record is kept here with its
entry. Every later write call first stores what is kept, so the caller's retry, once the store works again,
replays the write instead of reading request_in_progress until a restart; a retry while it still fails is
answered from the kept record. The entry goes with the record, so however many tries it takes, the store holds
it once (a Redis store that took the entry and not the outcome says so, OutcomeNotRecorded: the outcome is then
kept without its entry). Only this process knows them: one that dies with outcomes kept leaves their keys in
flight, and start-up recovery settles those unknown with an entry of their own, as after any crash. The Redis and
PostgreSQL stores remember the claims they made, so the retry settles the key as its own claim even though its
lock is gone by then, unless another replica read the key first and found it orphaned (``unknown``, for good).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from gateway.audit import trail
from gateway.crashpoints import crash_point
from gateway.records import AuditEntry, KeyRecord
from gateway.stores.base import OutcomeNotRecorded, Store

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
        """Settle the key with its entry; keep what the store does not take."""
        crash_point("before-settle")
        await self._settle(store, record, entry)

    async def retry(self, store: Store) -> None:
        """Store what is kept; keep what still fails. Concurrent callers never store one outcome twice."""
        if not self.kept:
            return
        kept, self.kept = self.kept, {}
        for record, entry in kept.values():
            await self._settle(store, record, entry)

    async def _settle(self, store: Store, record: KeyRecord, entry: AuditEntry | None) -> None:
        """Store the outcome and its entry (both or neither: Store.settle), else keep what is left to store."""
        try:
            await trail.settle(store, record, entry)
        except Exception as exc:
            log.error(
                "outcome %s of key %s kept until the store takes it: %s", record.state, record.key, type(exc).__name__
            )
            left = None if isinstance(exc, OutcomeNotRecorded) else entry  # an entry stored is never stored again
            self.kept[(record.caller, record.key)] = (record, left)
