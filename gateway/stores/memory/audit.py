"""The in-memory store's audit: a list, one hash chain in append order (gateway.audit.chain). ``append`` is also
what a settle calls, in the same step as its outcome (gateway.stores.memory.keys)."""

from __future__ import annotations

from collections.abc import AsyncIterator

from gateway.audit.chain import ChainKeys, checkpoint, sealed
from gateway.records import AuditEntry
from gateway.stores.memory.maps import MemoryMaps


class MemoryAudit(MemoryMaps):
    """The AuditLog role (gateway.stores.base)."""

    async def append_audit(self, entry: AuditEntry) -> AuditEntry:
        return append(self._audit, entry, self._keys)

    async def trim_audit(self, before: float, now: float) -> AuditEntry | None:
        cut = next((n for n, entry in enumerate(self._audit) if entry.at >= before), len(self._audit))
        if cut == 0:
            return None
        stored = sealed(checkpoint(self._audit[cut - 1], cut, before, now), self._audit[-1], self._keys)
        self._audit[:cut] = []
        self._audit.append(stored)
        return stored

    async def audit_entries(self) -> AsyncIterator[AuditEntry]:
        for entry in list(self._audit):
            yield entry


def append(chain: list[AuditEntry], entry: AuditEntry, keys: ChainKeys) -> AuditEntry:
    """Seal ``entry`` after the chain's last entry and append it; the entry as stored."""
    stored = sealed(entry, chain[-1] if chain else None, keys)
    chain.append(stored)
    return stored
