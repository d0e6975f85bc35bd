"""The audit chain: each stored entry is numbered, carries the hash of the one before it, and is sealed with a key
kept outside the store.

Each stored entry carries ``seq`` (1, 2, 3, …), ``prev_hash`` (the previous entry's hash, "" for the first),
``key_id`` (which key sealed it) and ``hash`` = HMAC-SHA256, under that key, of the entry's own fields,
``prev_hash`` and ``key_id``. The key ring comes from ``GATEWAY_AUDIT_KEY`` (comma-separated, the first seals,
every one verifies) or a file in the state directory (gateway/identity/secrets.py), never from the store:
someone who can edit the store but not read the key cannot re-seal an edited entry. Every store seals with
``sealed`` in the same atomic step that reads the last entry, so concurrent writers (replicas) cannot fork the chain.

``verify`` recomputes the chain and names every entry that does not fit. Entries sealed before the chain was
keyed (``key_id`` "", plain SHA-256, which anyone can recompute) still verify as such; an unkeyed entry *after* a
keyed one is a break, so an edit cannot hide by dropping the key, and ``audit verify`` accepts unkeyed entries
only up to the seq the operator names (``--unkeyed-through``: the last one an upgrade found).
Truncating the newest entries leaves a shorter chain that is still intact: ``head`` names the newest entry
(``SEQ:HASH``), an operator keeps it elsewhere, and ``verify(..., head=...)`` later proves the chain still holds
that entry unchanged. ``audit trim`` deletes the oldest entries and appends a ``trimmed`` checkpoint carrying the
seq and hash of the last one deleted, so the rest still verifies from there.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from dataclasses import asdict, dataclass, field, replace

from gateway.audit.entries import TRIMMED, trimmed
from gateway.records import AuditEntry

CHAIN_FIELDS = ("seq", "prev_hash", "hash", "key_id")


@dataclass(frozen=True)
class ChainKey:
    """One sealing key and its public id (a fingerprint that says which key, not what it is)."""

    id: str
    secret: bytes = field(repr=False)

    @classmethod
    def of(cls, secret: bytes) -> ChainKey:
        """A key with its id."""
        return cls("k" + hashlib.sha256(b"gateway audit key id\n" + secret).hexdigest()[:12], secret)


class ChainKeys:
    """The key ring: the first key seals new entries, every key verifies the entries it sealed."""

    def __init__(self, secrets_: list[bytes]) -> None:
        if not secrets_:
            raise ValueError("the audit key ring is empty")
        self.ring = [ChainKey.of(secret) for secret in secrets_]
        self.sealing = self.ring[0]

    @classmethod
    def ephemeral(cls) -> ChainKeys:
        """A random key for this process only (tests, throwaway stores): its entries verify nowhere else."""
        return cls([secrets.token_hex(32).encode()])

    def find(self, key_id: str) -> ChainKey | None:
        """The ring's key with this id, or None."""
        return next((key for key in self.ring if key.id == key_id), None)


def digest(entry: AuditEntry, prev_hash: str, key: ChainKey | None) -> str:
    """The hash an entry must carry, given the hash before it: HMAC under ``key``, or the unkeyed SHA-256 of
    entries sealed before the chain was keyed (``key`` None)."""
    fields = {name: value for name, value in asdict(entry).items() if name not in CHAIN_FIELDS}
    body: dict[str, object] = {"entry": fields, "prev": prev_hash}
    if key is None:
        return hashlib.sha256(_canonical(body)).hexdigest()
    return hmac.new(key.secret, _canonical({**body, "key": key.id}), hashlib.sha256).hexdigest()


def _canonical(body: dict[str, object]) -> bytes:
    return json.dumps(body, sort_keys=True, separators=(",", ":"), default=str).encode()


def sealed(entry: AuditEntry, last: AuditEntry | None, keys: ChainKeys) -> AuditEntry:
    """The entry as stored after ``last``: numbered, chained to it and sealed with the ring's sealing key."""
    prev_hash = last.hash if last is not None else ""
    seq = last.seq + 1 if last is not None else 1
    key = keys.sealing
    return replace(entry, seq=seq, prev_hash=prev_hash, key_id=key.id, hash=digest(entry, prev_hash, key))


def checkpoint(last_trimmed: AuditEntry, count: int, before: float, now: float) -> AuditEntry:
    """The entry ``audit trim`` appends: which entries it deleted, ending with which hash."""
    return trimmed(last_trimmed, count, before, now)


def head(entries: list[AuditEntry]) -> str | None:
    """The newest entry as ``SEQ:HASH`` (for an operator to keep outside the store), or None when empty."""
    return f"{entries[-1].seq}:{entries[-1].hash}" if entries else None


@dataclass
class Verdict:
    """What ``verify`` found: the breaks (the trail was changed), as sentences."""

    problems: list[str] = field(default_factory=list)


def verify(entries: list[AuditEntry], keys: ChainKeys, *, head: str | None = None) -> Verdict:
    """Every break in the chain, as sentences; with ``head`` (``SEQ:HASH``), also whether it still holds that."""
    verdict = Verdict()
    problems = verdict.problems
    start = _trimmed_through(entries)
    previous_hash, expected_seq = start
    keyed_seen = False
    for entry in entries:
        if entry.seq != expected_seq:
            if entry.seq > expected_seq:
                problems.append(f"entries {expected_seq}..{entry.seq - 1} are missing (deleted)")
            else:
                problems.append(f"entry {entry.seq} appears after entry {expected_seq - 1} (reordered or duplicated)")
        key = keys.find(entry.key_id) if entry.key_id else None
        if entry.key_id and key is None:
            problems.append(f"entry {entry.seq} was sealed with key {entry.key_id}, which is not in the key ring")
        elif not entry.key_id and keyed_seen:
            problems.append(f"entry {entry.seq} is unkeyed after keyed entries (edited and re-sealed)")
        elif entry.hash != digest(entry, entry.prev_hash, key):
            problems.append(f"entry {entry.seq} does not match its hash (edited)")
        elif entry.prev_hash != previous_hash:
            problems.append(f"entry {entry.seq} does not follow the entry before it (deleted or reordered)")
        keyed_seen = keyed_seen or bool(entry.key_id)
        previous_hash, expected_seq = entry.hash, entry.seq + 1
    if head is not None:
        problems += _against_head(entries, head)
    return verdict


def _trimmed_through(entries: list[AuditEntry]) -> tuple[str, int]:
    """Where the kept chain starts: after the last entry the newest trim checkpoint says it deleted."""
    checkpoints = [entry for entry in entries if entry.outcome == TRIMMED and entry.key_id]
    if not checkpoints:
        return "", 1
    newest = max(checkpoints, key=lambda entry: int(entry.extra.get("trimmed_through", 0)))
    return str(newest.extra.get("trimmed_head", "")), int(newest.extra.get("trimmed_through", 0)) + 1


def _against_head(entries: list[AuditEntry], head: str) -> list[str]:
    seq_text, _, hash_ = head.partition(":")
    if not seq_text.isdigit() or not hash_:
        return [f"the head {head!r} is not SEQ:HASH as `audit head` prints it"]
    seq = int(seq_text)
    found = next((entry for entry in entries if entry.seq == seq), None)
    if found is None:
        newest = entries[-1].seq if entries else 0
        if seq > newest:
            return [f"the chain ends at entry {newest}, before the exported head {seq} (truncated)"]
        return [f"entry {seq} of the exported head is no longer in the chain (trimmed or deleted)"]
    if found.hash != hash_:
        return [f"entry {seq} is not the entry the exported head names (the chain was rewritten)"]
    return []
