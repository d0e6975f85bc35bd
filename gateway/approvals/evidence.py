"""Passkey approvals checked from the audit alone, offline: what ``audit verify`` adds for them, and the evidence
bundle ``audit export --plan`` writes.

    keys_of    the public keys the ``passkey`` entries hold (enrolled, and when revoked), by credential id
    problems   every signed decision whose signature, challenge or facts do not hold, and every write executed
               with passkeys required on a yes that no verified signature backs
    bundle     one plan's entries and the passkey entries of the keys that signed them: all a third party needs
    bundled    a bundle's entries back, as stored

A signed ``approval`` entry carries ``extra.passkey``: the assertion (credential id, authenticator data, client
data, signature) and ``signed``, the facts its challenge is the SHA-256 of (gateway.approvals.passkeys). It holds
when: the signed facts name this entry's approval, decision and facts digest; the ``proposed`` entry's facts hash
to that digest (gateway.approvals.digest); the key was enrolled to this approver and not revoked before; and the
signature verifies. Pure: entries in, sentences out.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from gateway.approvals import passkeys
from gateway.approvals.digest import digest_of
from gateway.audit import entries
from gateway.audit.events import EXECUTED
from gateway.records import AuditEntry, Passkey

BUNDLE_FORMAT = "mcp-safety-gateway/evidence/v1"


@dataclass(frozen=True)
class EnrolledKey:
    """A public key as its ``passkey`` entries record it."""

    passkey: Passkey
    approver: dict[str, Any]
    revoked_at: float | None = None


def keys_of(trail: Iterable[AuditEntry]) -> dict[str, EnrolledKey]:
    """The keys the trail's ``passkey`` entries enrolled, with when each was revoked, by credential id."""
    found: dict[str, EnrolledKey] = {}
    for entry in trail:
        if entry.outcome != entries.PASSKEY:
            continue
        credential = str(entry.extra.get("credentialId", ""))
        if entry.confirmation == "enrolled" and credential not in found:
            key = Passkey(credential, str(entry.extra.get("publicKey", "")), "", "", "", entry.at)
            found[credential] = EnrolledKey(key, dict(entry.extra.get("approver") or {}))
        elif entry.confirmation == "revoked" and credential in found:
            found[credential] = EnrolledKey(found[credential].passkey, found[credential].approver, entry.at)
    return found


def problems(trail: list[AuditEntry]) -> list[str]:
    """What does not hold about the trail's passkey approvals (see the module docstring)."""
    keys = keys_of(trail)
    facts = {
        entry.extra.get("approval"): entry.extra.get("facts") for entry in trail if entry.outcome == entries.PROPOSED
    }
    found: list[str] = []
    signed: set[tuple[str | None, str]] = set()
    for entry in trail:
        if entry.outcome == entries.APPROVAL and "passkey" in entry.extra:
            why = _why_not(entry, keys, facts)
            if why is None:
                signed.add((entry.plan_id, _who(entry.extra.get("approver"))))
            else:
                found.append(f"entry {entry.seq} (plan {entry.plan_id}): the passkey approval does not hold: {why}")
    for entry in trail:
        if entry.outcome in EXECUTED and entry.confirmation == "approved" and entry.extra.get("passkey") == "required":
            for approver in entry.extra.get("approvers") or []:
                if (entry.plan_id, _who(approver)) not in signed:
                    found.append(
                        f"entry {entry.seq} (plan {entry.plan_id}): executed on a yes by {_who(approver)} that no"
                        " verified passkey signature backs"
                    )
    return found


def bundle(trail: list[AuditEntry], plan_id: str) -> dict[str, Any]:
    """One plan's evidence: its entries and the ``passkey`` entries of every key its approvals were signed with."""
    own = [entry for entry in trail if entry.plan_id == plan_id]
    used = {
        str(entry.extra["passkey"].get("credentialId"))
        for entry in own
        if entry.outcome == entries.APPROVAL and isinstance(entry.extra.get("passkey"), dict)
    }
    keys = [entry for entry in trail if entry.outcome == entries.PASSKEY and entry.extra.get("credentialId") in used]
    return {"format": BUNDLE_FORMAT, "plan": plan_id, "entries": [asdict(entry) for entry in [*keys, *own]]}


def bundled(data: Any) -> list[dict[str, Any]]:
    """A bundle's entries, each as stored (ValueError if it is not a bundle)."""
    if not isinstance(data, dict) or data.get("format") != BUNDLE_FORMAT or not isinstance(data.get("entries"), list):
        raise ValueError(f"not an evidence bundle of format {BUNDLE_FORMAT}")
    return [entry for entry in data["entries"] if isinstance(entry, dict)]


def _why_not(entry: AuditEntry, keys: dict[str, EnrolledKey], facts: dict[Any, Any]) -> str | None:
    evidence = entry.extra.get("passkey")
    if not isinstance(evidence, dict) or not isinstance(evidence.get("signed"), dict):
        return "the evidence is not readable"
    said = evidence["signed"]
    expected = (entry.extra.get("approval"), entry.confirmation, entry.extra.get("factsDigest"))
    if (said.get("approvalId"), said.get("decision"), said.get("factsDigest")) != expected:
        return "the signed facts name another approval, decision or digest than the entry"
    proposed = facts.get(entry.extra.get("approval"))
    if not isinstance(proposed, dict) or digest_of(proposed) != said.get("factsDigest"):
        return "the proposed facts do not hash to the digest that was signed"
    key = keys.get(str(evidence.get("credentialId", "")))
    if key is None:
        return "no passkey entry enrolled the key it names"
    if _who(key.approver) != _who(entry.extra.get("approver")):
        return "the key was enrolled by another person"
    if key.revoked_at is not None and key.revoked_at <= entry.at:
        return "the key was revoked before the decision"
    try:
        challenge = passkeys.challenge_of(said)
        passkeys.verify(evidence, key.passkey, challenge, passkeys.relying_party(str(said.get("publicUrl", ""))))
    except (passkeys.PasskeyRefused, TypeError, ValueError) as refused:
        return str(refused)
    return None


def _who(approver: Any) -> str:
    """A person as the audit names them: ``subject (issuer)``."""
    kept = approver if isinstance(approver, dict) else {}
    return f"{kept.get('subject')} ({kept.get('issuer')})"
