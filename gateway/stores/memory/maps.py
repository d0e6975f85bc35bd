"""What every role of the in-memory store shares: the keys that seal its audit chain, the audit list itself (a
settle appends to it in the same step as the outcome), and ``expiring``, a map whose entries carry their own
expiry."""

from __future__ import annotations

import time
from typing import Any

from cachetools import TLRUCache

from gateway.audit.chain import ChainKeys
from gateway.records import AuditEntry

MAX_ITEMS = 1_000_000


class MemoryMaps:
    """One process's store state: what each role class (gateway.stores.memory.keys, audit, ...) adds its operations
    and maps to (a role makes its maps in its ``__init__``)."""

    def __init__(self, keys: ChainKeys | None = None) -> None:
        self._keys = keys or ChainKeys.ephemeral()
        self._audit: list[AuditEntry] = []


def expiring() -> TLRUCache[Any, tuple[Any, float]]:
    """A map of ``(value, expires_at)`` pairs, an entry dropped once the clock passes its ``expires_at``."""
    return TLRUCache(MAX_ITEMS, _until, timer=time.time)


def _until(_key: Any, value: tuple[Any, float], _now: float) -> float:
    return value[1]
