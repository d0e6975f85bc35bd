"""One codec for the records a store keeps as JSON text: plans, key records, audit entries, approvals, sessions,
tasks, passkeys.

A record is written as the compact JSON of its fields (``dataclasses.asdict``) and read back knowing only this
version's fields: a field a newer version wrote is dropped, a field an older version did not write takes its
default. So adding a field to a record breaks neither old records nor a rolling upgrade (replicas of two versions
on one Redis or PostgreSQL), and a rollback reads what the newer version stored. The SQLite, Redis and PostgreSQL
stores read every body through ``load``; the memory store keeps the objects themselves.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, TypeVar

from gateway.records import Approval, ApproverSession, AuditEntry, Decision, KeyRecord, Passkey, Plan, Task

R = TypeVar("R", Plan, KeyRecord, AuditEntry, Approval, ApproverSession, Task, Passkey)


def dump(record: Plan | KeyRecord | AuditEntry | Approval | ApproverSession | Task | Passkey) -> str:
    """A record as stored: the JSON of its fields."""
    return json.dumps(dataclasses.asdict(record), separators=(",", ":"))


def load(kind: type[R], body: str, **override: Any) -> R:
    """A record of ``kind`` read back from ``body``, with ``override`` replacing fields the store keeps beside
    the body (a plan's ``in_use_by``, a key's ``state``); fields this version does not know are dropped."""
    data = _known(kind, json.loads(body))
    if kind is Approval:
        data["decisions"] = tuple(Decision(**_known(Decision, decision)) for decision in data.get("decisions", ()))
    return kind(**{**data, **override})


def _known(kind: type[Any], data: dict[str, Any]) -> dict[str, Any]:
    names = {field.name for field in dataclasses.fields(kind)}
    return {name: value for name, value in data.items() if name in names}
