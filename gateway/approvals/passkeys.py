"""Passkey approvals: a yes (or a no) that only the approver's own authenticator can give, over the exact write.

    relying_party   the page's origin and WebAuthn relying party id, both from ``[approvals] public_url``
    challenge_of    what an authenticator signs for one decision: SHA-256 over the canonical JSON (RFC 8785) of
                    ``signed_facts``: the facts digest (gateway.approvals.digest: tool, target, arguments, the
                    numbers, the question as shown, the plan and its version, the rule), the approval id, the
                    page's public URL, the approval's expiry and the decision (approve or reject)
    enrolled        a registration response checked (type, challenge, origin, relying party, user present and
                    verified): the credential id, its public key and its counter
    verify          an assertion checked against an enrolled key: type, challenge, origin, relying party hash,
                    user present, user verified, the signature over authenticatorData || SHA-256(clientDataJSON),
                    and the counter (it must go up once the authenticator counts); PasskeyRefused says what failed
    signed_with     the passkeys an approval's decisions name, read from the store
    unsigned        the approvers of an approval whose decision carries no valid signature by a passkey of
                    theirs that is enrolled and not revoked (and not the caller's, with four eyes): what the write
                    path refuses on (gateway.write.ask.people) and ``audit verify`` reports

Checked with ``fido2`` (Yubico's library: its CBOR, COSE key and authenticator-data parsers; cryptography does the
signature), chosen over ``webauthn`` because it needs nothing but ``cryptography``, which the gateway already has,
and its primitives check one step at a time what ``audit verify`` must check offline from an entry alone.

Pure but for the signature check and ``signed_with``'s reads: no clock.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from cryptography.exceptions import InvalidSignature

from gateway.approvals.digest import canonical
from gateway.records import Approval, Decision, Passkey
from gateway.stores.base import Passkeys

if TYPE_CHECKING:
    from fido2.webauthn import AuthenticatorData, CollectedClientData

ASSERTION_FIELDS = ("credentialId", "authenticatorData", "clientDataJSON", "signature")
"""What a decision keeps of its assertion (base64url each): all ``audit verify`` needs beside the public key."""


class PasskeyRefused(Exception):
    """A registration or an assertion that does not hold; the message says which check failed."""


@dataclass(frozen=True)
class RelyingParty:
    """Where signatures are made: the page's origin (``scheme://host[:port]``) and its relying party id (host)."""

    origin: str
    rp_id: str


def relying_party(public_url: str) -> RelyingParty:
    """The page's relying party, from its public URL (``check`` refuses a URL whose host is an IP address: WebAuthn
    takes a domain name only)."""
    parts = urlsplit(public_url)
    return RelyingParty(f"{parts.scheme}://{parts.netloc}", parts.hostname or "")


def signed_facts(approval: Approval, digest: str | None, public_url: str, verdict: str) -> dict[str, Any]:
    """The facts one decision's challenge commits to (``digest``: the facts digest the write computes now)."""
    return {
        "factsDigest": digest,
        "approvalId": approval.approval_id,
        "publicUrl": public_url,
        "expiresAt": approval.expires_at,
        "decision": verdict,
    }


def challenge_of(facts: dict[str, Any]) -> bytes:
    """The challenge an authenticator signs for ``signed_facts``: SHA-256 over their canonical JSON."""
    return hashlib.sha256(canonical(facts)).digest()


def enrolled(response: dict[str, Any], challenge: bytes, party: RelyingParty) -> tuple[str, str, int]:
    """A registration response (``clientDataJSON``, ``attestationObject``, base64url) checked: the credential id
    and COSE public key (base64url) and the authenticator's counter. Attestation is not asked for ("none"): who
    enrols is the signed-in person, not a device model."""
    from fido2 import cbor  # fido2 only where passkeys are checked (about 1 MiB of a worker)
    from fido2.utils import websafe_decode, websafe_encode
    from fido2.webauthn import AttestationObject, CollectedClientData

    try:
        client = CollectedClientData(websafe_decode(response["clientDataJSON"]))
        attestation = AttestationObject(websafe_decode(response["attestationObject"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise PasskeyRefused(f"the registration response is not readable ({type(exc).__name__})") from exc
    _check_client(client, CollectedClientData.TYPE.CREATE, challenge, party)
    data = attestation.auth_data
    _check_flags(data, party)
    credential = data.credential_data
    if credential is None:
        raise PasskeyRefused("the registration carries no credential")
    key = websafe_encode(cbor.encode(dict(credential.public_key)))
    return websafe_encode(credential.credential_id), key, data.counter


def verify(assertion: dict[str, Any], passkey: Passkey, challenge: bytes, party: RelyingParty) -> int:
    """An assertion checked against ``passkey`` for ``challenge``: the authenticator's new counter."""
    from fido2 import cbor
    from fido2.cose import CoseKey
    from fido2.utils import websafe_decode
    from fido2.webauthn import AuthenticatorData, CollectedClientData

    try:
        client = CollectedClientData(websafe_decode(assertion["clientDataJSON"]))
        data = AuthenticatorData(websafe_decode(assertion["authenticatorData"]))
        signature = websafe_decode(assertion["signature"])
        decoded = cbor.decode(websafe_decode(passkey.public_key))
        if not isinstance(decoded, dict):
            raise ValueError("the public key is not a COSE key")
        key = CoseKey.parse(decoded)
    except (KeyError, TypeError, ValueError) as exc:
        raise PasskeyRefused(f"the assertion is not readable ({type(exc).__name__})") from exc
    if assertion.get("credentialId") != passkey.credential_id:
        raise PasskeyRefused("the assertion names another credential")
    _check_client(client, CollectedClientData.TYPE.GET, challenge, party)
    _check_flags(data, party)
    try:
        key.verify(bytes(data) + client.hash, signature)
    except (InvalidSignature, ValueError) as exc:
        raise PasskeyRefused("the signature does not verify with the enrolled public key") from exc
    if (data.counter or passkey.sign_count) and data.counter <= passkey.sign_count:
        raise PasskeyRefused(
            f"the authenticator's counter did not go up ({data.counter} after {passkey.sign_count}): a cloned key?"
        )
    return data.counter


def kept(assertion: dict[str, Any]) -> dict[str, str]:
    """What a decision keeps of an assertion: ASSERTION_FIELDS, as strings."""
    return {name: str(assertion.get(name, "")) for name in ASSERTION_FIELDS}


async def signed_with(approval: Approval, store: Passkeys) -> dict[str, Passkey]:
    """The passkeys the approval's decisions name, as the store has them now (revoked ones too), by credential id:
    what ``unsigned`` checks them against."""
    named = {decision.assertion.get("credentialId", "") for decision in approval.decisions if decision.assertion}
    found = [await store.get_passkey(credential) for credential in sorted(named)]
    return {key.credential_id: key for key in found if key is not None}


def unsigned(
    approval: Approval,
    digest: str | None,
    public_url: str,
    keys: dict[str, Passkey],
    *,
    counters: bool = False,
    when_signed: bool = False,
) -> list[str]:
    """Why each approve of ``approval`` does not count as a person's signed yes over ``digest`` (empty: all do).
    ``keys`` are the passkeys by credential id as the store has them now: a revoked one signs nothing from then
    on (the write asks this), or, ``when_signed`` (the audit asks it), nothing it signed after its revocation.
    The counter is checked when the decision is made (``counters``); afterwards the key's stored counter is that
    decision's own."""
    party, problems = relying_party(public_url), []
    for decision in approval.decisions:
        if decision.verdict != "approve":
            continue
        key = keys.get((decision.assertion or {}).get("credentialId", ""))
        if when_signed and key is not None and key.revoked_at is not None and key.revoked_at > decision.at:
            keys = {**keys, key.credential_id: replace(key, revoked_at=None)}  # revoked after it signed this
        why = _why_unsigned(approval, decision, digest, public_url, keys, party, counters)
        if why is not None:
            problems.append(f"{decision.name}: {why}")
    return problems


def _why_unsigned(
    approval: Approval,
    decision: Decision,
    digest: str | None,
    public_url: str,
    keys: dict[str, Passkey],
    party: RelyingParty,
    counters: bool,
) -> str | None:
    if decision.assertion is None:
        return "no passkey signature"
    passkey = keys.get(decision.assertion.get("credentialId", ""))
    if passkey is None:
        return "signed with a passkey that is not enrolled"
    if passkey.revoked_at is not None:
        return "signed with a revoked passkey"
    if passkey.person != decision.approver:
        return "signed with another person's passkey"
    if approval.four_eyes and passkey.person == approval.caller_person:
        return "signed with the caller's own passkey (four eyes)"
    facts = signed_facts(approval, digest, public_url, decision.verdict)
    try:
        verify(decision.assertion, passkey if counters else _uncounted(passkey), challenge_of(facts), party)
    except PasskeyRefused as refused:
        return str(refused)
    return None


def _uncounted(passkey: Passkey) -> Passkey:
    return replace(passkey, sign_count=0)


def _check_client(client: CollectedClientData, kind: str, challenge: bytes, party: RelyingParty) -> None:
    if client.type != kind:
        raise PasskeyRefused(f"the client data is {client.type!r}, not {kind!r}")
    if not hmac.compare_digest(client.challenge, challenge):
        raise PasskeyRefused("the authenticator signed another challenge: other facts, or another approval")
    if client.origin != party.origin:
        raise PasskeyRefused(f"the browser was at {client.origin!r}, not the page's origin {party.origin!r}")


def _check_flags(data: AuthenticatorData, party: RelyingParty) -> None:
    if not hmac.compare_digest(data.rp_id_hash, hashlib.sha256(party.rp_id.encode()).digest()):
        raise PasskeyRefused(f"the authenticator answered for another relying party than {party.rp_id!r}")
    if not data.is_user_present():
        raise PasskeyRefused("the authenticator reported no user presence")
    if not data.is_user_verified():
        raise PasskeyRefused("the authenticator reported no user verification (PIN, biometric): required here")
