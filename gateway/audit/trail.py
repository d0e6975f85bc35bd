"""Writing the audit trail: where an entry becomes stored, the policy when one cannot be, and recovery's entries.

An entry is stored in one of two ways: on its own (``append``: refusals, replays, recovered keys) or together
with the outcome of a write under its key (``settle``: one transaction where the store has one). Both end in
``_stored``, the one place where an entry is known to be stored, sealed into the chain; from there it is offered
to the audit stream (gateway.audit.sinks).

An entry that cannot be stored (the store is unreachable) is logged at error level instead and the call goes
on: the write's own record, which the caller's retry depends on, matters more than its audit line. A key left
in flight by a process that died is settled ``unknown`` at the next ``serve``, and gets the entry its call never
wrote, with the tool and version its claim recorded.
"""

from __future__ import annotations

import logging
from typing import Protocol

from gateway.audit import entries, sinks
from gateway.errors import OutcomeNotRecorded, StoreUnavailable
from gateway.records import AuditEntry, KeyRecord


class AuditStore(Protocol):
    """What the trail needs of a store (every gateway.stores.base.Store has it; the stores in turn seal entries
    with gateway.audit.chain, so this package names no store)."""

    async def append_audit(self, entry: AuditEntry) -> AuditEntry: ...

    async def settle(self, record: KeyRecord, entry: AuditEntry | None = None) -> AuditEntry | None: ...

    async def recover_in_flight(self) -> list[KeyRecord]: ...


log = logging.getLogger(__name__)


async def append(store: AuditStore, entry: AuditEntry) -> None:
    """Append an entry; if the store cannot be reached, log it instead (never a secret: ids and codes only)."""
    try:
        stored = await store.append_audit(entry)
    except StoreUnavailable:
        log.error("audit entry not stored, the store is unreachable: %s", entry)
        return
    _stored(store, stored)


async def settle(store: AuditStore, record: KeyRecord, entry: AuditEntry | None) -> None:
    """Record a write's outcome under its key together with its audit entry. If the store fails (unreachable, a
    locked or full file) the entry is logged too and the error goes on to the write path, which still answers the
    caller and keeps the outcome for a later try (gateway.write.unsettled)."""
    try:
        stored = await store.settle(record, entry)
    except OutcomeNotRecorded as exc:  # the entry is in the store; the outcome is kept and settled later
        _stored(store, exc.entry)
        raise
    except StoreUnavailable:
        log.error("audit entry not stored, the store is unreachable: %s", entry)
        raise
    except Exception as exc:
        log.error("audit entry not stored (%s): %s", type(exc).__name__, entry)
        raise
    if stored is not None:
        _stored(store, stored)


def _stored(store: AuditStore, entry: AuditEntry) -> None:
    """The entry is in the store, sealed into the chain: the place to hand it on (a sink, a stream)."""
    sinks.publish(store, entry)  # stored, so it may be streamed out (never waits, never raises)


async def recover(store: AuditStore, now: float) -> list[KeyRecord]:
    """Start-up recovery, a step of ``serve`` only: keys a crash left in flight now read outcome_unknown, and each
    gets its audit entry. Returns the recovered keys."""
    recovered = await store.recover_in_flight()
    for record in recovered:
        log.warning("key %s of %s was in flight at start-up: its outcome is unknown", record.key, record.caller)
        await append(store, entries.recovered(record, now))
    return recovered
