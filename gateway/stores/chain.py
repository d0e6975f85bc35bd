"""The audit hash chain: each stored entry is numbered and carries the hash of the one before it.

``hash`` = SHA-256 over the entry's own fields and ``prev_hash``; every store seals an entry with ``sealed`` in
the same atomic step that reads the last one, so concurrent writers (replicas) cannot fork the chain.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, replace

from gateway.stores.base import AuditEntry

CHAIN_FIELDS = ("seq", "prev_hash", "hash")


def digest(entry: AuditEntry, prev_hash: str) -> str:
    """The hash an entry must carry, given the hash before it."""
    fields = {name: value for name, value in asdict(entry).items() if name not in CHAIN_FIELDS}
    canonical = json.dumps({"entry": fields, "prev": prev_hash}, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def sealed(entry: AuditEntry, last: AuditEntry | None) -> AuditEntry:
    """The entry as stored after ``last``: numbered and chained to it."""
    prev_hash = last.hash if last is not None else ""
    seq = last.seq + 1 if last is not None else 1
    return replace(entry, seq=seq, prev_hash=prev_hash, hash=digest(entry, prev_hash))
