"""``mcp-safety-gateway approvals passkeys [--revoke CREDENTIAL_ID ...] [--person P] [--json]``: the passkeys
approvers enrolled on the approval page, and revoking them.

An operator's command: it opens the configured store directly (like ``approvals sessions``), lists every passkey
(credential id, person as issuer and subject with what the page shows beside them, its name, when enrolled,
revoked or not) and revokes the ones named. A revoked passkey stays in the store, so the signatures it made stay
checkable (``audit verify``), and signs nothing from then on: every decision, and every write an approval allows,
checks the list as the store has it. Each revoke leaves a ``passkey`` audit entry. Every cell is escaped
(gateway/text.py).
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import replace

from gateway.audit import entries, trail
from gateway.cli.sessions import operator_store
from gateway.config import GatewayConfig
from gateway.identity.person import audited, names, readable_person
from gateway.records import Passkey
from gateway.text import columns, rfc3339

PROGRAM = "mcp-safety-gateway approvals passkeys"


async def run(config: GatewayConfig, revoke: list[str], person: str | None, as_json: bool) -> int:
    """List the passkeys, or revoke those named (by credential id, or every one of a person); the exit code."""
    store = operator_store(config, PROGRAM, "passkeys")
    if store is None:
        return 2
    try:
        kept = await store.passkeys()
        if not revoke and person is None:
            _show(kept, as_json)
            return 0
        live = [key for key in kept if key.revoked_at is None]
        chosen = [key for key in live if key.credential_id in revoke or names(person, key.person)]
        now = time.time()
        for key in chosen:
            if await store.replace_passkey(replace(key, revoked_at=now)):
                await trail.append(store, entries.passkey(key, now, "revoked", audited(key.person, key.name)))
                print(f"revoked {key.credential_id}  {readable_person(audited(key.person, key.name))}")
    finally:
        await store.close()
    unknown = [name for name in revoke if name not in {key.credential_id for key in chosen}]
    for name in unknown:
        print(f"{PROGRAM}: no unrevoked passkey {json.dumps(name)}", file=sys.stderr)
    if person is not None and not any(names(person, key.person) for key in chosen):
        print(f"{PROGRAM}: no unrevoked passkey of {json.dumps(person)}", file=sys.stderr)
        return 1
    return 1 if unknown else 0


def _show(keys: list[Passkey], as_json: bool) -> None:
    if as_json:
        for key in keys:
            revoked = rfc3339(key.revoked_at) if key.revoked_at is not None else None
            facts = {"credentialId": key.credential_id, **audited(key.person, key.name), "name": key.label}
            print(json.dumps({**facts, "enrolledAt": rfc3339(key.created_at), "revokedAt": revoked}))
        return
    if not keys:
        print("no passkey is enrolled")
        return
    rows = [("credential", "person", "name", "enrolled", "state")]
    for key in keys:
        state = f"revoked {rfc3339(key.revoked_at)}" if key.revoked_at is not None else "active"
        who = readable_person(audited(key.person, key.name))
        rows.append((key.credential_id, who, key.label, rfc3339(key.created_at), state))
    print(columns(rows))
