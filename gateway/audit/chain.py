"""The audit hash chain: each stored entry is numbered and carries the hash of the one before it.

Each stored entry carries ``seq`` (1, 2, 3, …), ``prev_hash`` (the previous entry's hash, "" for the first) and
``hash`` = SHA-256 over the entry's own fields and ``prev_hash``. Every store seals an entry with ``sealed`` in
the same atomic step that reads the last one, so concurrent writers (replicas) cannot fork the chain.
``verify`` recomputes the chain and names the first entry that does not fit. Truncating the newest entries
leaves a shorter chain that is still intact: record the head hash ``verify`` prints somewhere else if that
matters.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, replace

from gateway.records import AuditEntry

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
