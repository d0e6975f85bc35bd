"""The in-memory store as a gateway opens it: its role classes composed into one Store (gateway.stores.base), plus
the two steps a store takes as a whole, both nothing here: nothing outside this process can see it."""

from __future__ import annotations

from gateway.stores.memory.audit import MemoryAudit
from gateway.stores.memory.counters import MemoryCounters
from gateway.stores.memory.keys import MemoryKeys
from gateway.stores.memory.page_state import MemoryPageState
from gateway.stores.memory.passkeys import MemoryPasskeys


class MemoryStore(MemoryKeys, MemoryAudit, MemoryCounters, MemoryPageState, MemoryPasskeys):
    """Every role in TTL maps and a list, in this process."""

    async def serve_from(self, holder: str) -> None:
        return None  # nothing outside this process can see it

    async def close(self) -> None:
        return None
