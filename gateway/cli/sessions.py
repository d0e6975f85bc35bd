"""``mcp-safety-gateway approvals sessions [--revoke ID ...] [--person P] [--json]``: who is signed in on the
approval page, and ending it.

An operator's command, not an approver's: it opens the configured store directly (like ``audit``), lists every live
approver session (id, person as issuer and subject with what the page shows beside them, how they signed in,
since when, until when) and deletes the ones named. Sessions live in the store, so a revoke ends a session on
every replica at its next request; a person whose access must end for good is also taken out of the config
(``[approvals.approvers]``, ``[[approvals.tokens]]``), which every request checks too. Every cell is escaped
(gateway/text.py). ``operator_store`` opens the store for this command and for ``approvals passkeys``.
"""

from __future__ import annotations

import json
import sys
import time

from gateway.audit.chain import ChainKeys
from gateway.config import GatewayConfig
from gateway.identity.person import audited, names, readable_person
from gateway.identity.secrets import load_audit_keys
from gateway.records import ApproverSession
from gateway.stores import Store, open_store
from gateway.text import columns, rfc3339

PROGRAM = "mcp-safety-gateway approvals sessions"


async def run(config: GatewayConfig, revoke: list[str], person: str | None, as_json: bool) -> int:
    """List the live sessions, or revoke those named (by id, or every one of a person); the exit code."""
    store = operator_store(config, PROGRAM, "sessions")
    if store is None:
        return 2
    try:
        live = await store.sessions(time.time())
        if not revoke and person is None:
            _show(live, as_json)
            return 0
        chosen = [session for session in live if session.session_id in revoke or names(person, session.person)]
        for session in chosen:
            await store.delete_session(session.session_id)
            print(f"revoked {session.session_id}  {readable_person(audited(session.person, session.name))}")
    finally:
        await store.close()
    unknown = [name for name in revoke if name not in {session.session_id for session in chosen}]
    for name in unknown:
        print(f"{PROGRAM}: no live session {json.dumps(name)}", file=sys.stderr)
    if person is not None and not any(names(person, session.person) for session in chosen):
        print(f"{PROGRAM}: no live session of {json.dumps(person)}", file=sys.stderr)
        return 1
    return 1 if unknown else 0


def operator_store(config: GatewayConfig, program: str, kept: str) -> Store | None:
    """The configured store, opened for an operator's command with the audit key ring (its revokes are audited);
    None, said on stderr, for the memory store, which keeps ``kept`` only inside the serving process."""
    if config.gateway.store == "memory":
        print(f"{program}: the memory store keeps {kept} only inside the serving process", file=sys.stderr)
        return None
    return open_store(config.gateway.store, ChainKeys(load_audit_keys(config.gateway.state_path())))


def _show(sessions: list[ApproverSession], as_json: bool) -> None:
    if as_json:
        for session in sessions:
            kept = audited(session.person, session.name)
            print(
                json.dumps(
                    {
                        "id": session.session_id,
                        **kept,
                        "via": session.via,
                        "audience": session.audience,
                        "signedInAt": rfc3339(session.created_at),
                        "expiresAt": rfc3339(session.expires_at),
                    }
                )
            )
        return
    if not sessions:
        print("nobody is signed in on the approval page")
        return
    rows = [("id", "person", "via", "signed in", "expires", "page")]
    for session in sessions:
        who = readable_person(audited(session.person, session.name))
        rows.append(
            (
                session.session_id,
                who,
                session.via,
                rfc3339(session.created_at),
                rfc3339(session.expires_at),
                session.audience,
            )
        )
    print(columns(rows))
