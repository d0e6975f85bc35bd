"""The approval page's passkeys: a signed-in person enrols them, and a decision that needs one is signed with it.

    GET  /approvals/passkeys     the person's own passkeys, and a form that registers one more (WebAuthn, user
                                 verification required, relying party = the page's origin)
    POST /approvals/passkeys     the registration, checked (gateway.approvals.passkeys.enrolled) against the
                                 challenge this page signed into the form for this session, stored and audited;
                                 a person who has a passkey adds another only with one of theirs signing that
                                 challenge first (step-up), and only within 10 minutes of signing in
    GET  /approvals/passkey.js   the one script WebAuthn needs: it asks the authenticator and posts its answer

``signing`` gives a decision form what its script asks the authenticator to sign: the challenge of that exact
decision (approve or reject, of this approval, over its facts digest, at this page, until its expiry) and the
person's own unrevoked credentials. ``assertion_of`` reads the posted answer back. Without the script (or
without a passkey) the form still posts, and the decision is refused as unsigned: nothing changes.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from dataclasses import replace
from typing import Any

from fido2.utils import websafe_decode, websafe_encode
from starlette.datastructures import FormData

from gateway.approvals import passkeys
from gateway.audit import entries, trail
from gateway.identity.person import audited
from gateway.records import Approval, ApproverSession, Passkey
from gateway.runtime import Gateway

ENROL_SECONDS = 300
"""How long a registration form's challenge holds."""
FRESH_SIGN_IN_SECONDS = 600
"""How recent the sign-in must be to register a passkey: a stolen session cookie, used later, cannot add a key of
the thief's to a person (who then signs with it); the person signs in again instead."""
MAX_PASSKEYS = 10
"""How many unrevoked passkeys one person may hold."""
MAX_LABEL = 60


def relying_party(gw: Gateway) -> passkeys.RelyingParty:
    return passkeys.relying_party(gw.approvals_url or "")


async def own_passkeys(gw: Gateway, person: str) -> list[Passkey]:
    """A person's passkeys, revoked ones too, newest first."""
    return [key for key in await gw.store.passkeys() if key.person == person]


def registration_options(
    gw: Gateway, session: ApproverSession, keys: list[Passkey], challenge: bytes
) -> dict[str, Any]:
    """What the script passes to ``navigator.credentials.create`` (binary values base64url)."""
    party, live = relying_party(gw), [key.credential_id for key in keys if key.revoked_at is None]
    return {
        "challenge": _b64(challenge),
        "rp": {"id": party.rp_id, "name": gw.config.gateway.name},
        "user": {
            "id": _b64(hashlib.sha256(session.person.encode()).digest()[:16]),
            "name": session.name,
            "displayName": session.name,
        },
        "pubKeyCredParams": [{"type": "public-key", "alg": alg} for alg in (-7, -8, -257)],
        "authenticatorSelection": {"residentKey": "preferred", "userVerification": "required"},
        "excludeCredentials": live,
        "attestation": "none",
        "timeout": ENROL_SECONDS * 1000,
        # With a passkey already, another is added only with one of them (step-up): the same challenge, signed.
        "stepUp": live,
    }


STALE_SIGN_IN = (
    "Registering a passkey needs a sign-in from the last 10 minutes: sign out, sign in again, then register it."
)


def fresh(gw: Gateway, session: ApproverSession) -> bool:
    """Whether the session signed in recently enough to register a passkey (FRESH_SIGN_IN_SECONDS)."""
    return gw.clock() - session.created_at <= FRESH_SIGN_IN_SECONDS


STEP_UP = (
    "You have a passkey already: another is registered only with one of yours signing this form (your browser asks"
    " for it first). Nothing changed."
)


async def _stepped_up(gw: Gateway, live: list[Passkey], assertion: dict[str, Any] | None, challenge: bytes) -> bool:
    """Whether one of the person's own live passkeys signed the registration form's challenge (its counter is
    stored, so the assertion is used once)."""
    key = next((each for each in live if assertion and assertion.get("credentialId") == each.credential_id), None)
    if key is None or assertion is None:
        return False
    try:
        counter = passkeys.verify(assertion, key, challenge, relying_party(gw))
    except passkeys.PasskeyRefused:
        return False
    return await gw.store.replace_passkey(replace(key, sign_count=counter))


def new_challenge() -> bytes:
    return secrets.token_bytes(32)


async def enrol(
    gw: Gateway, session: ApproverSession, kept: dict[str, Any], form: FormData
) -> tuple[Passkey | None, str]:
    """Check and store a posted registration; the passkey (None: refused) and the sentence the page shows."""
    if kept.get("session") != session.session_id:
        return None, "That registration form was for another sign-in; start again from this page."
    if not fresh(gw, session):
        return None, STALE_SIGN_IN
    live = [key for key in await own_passkeys(gw, session.person) if key.revoked_at is None]
    if len(live) >= MAX_PASSKEYS:
        return None, f"You already have {MAX_PASSKEYS} passkeys; ask an operator to revoke one first."
    label = str(form.get("label") or "").strip()[:MAX_LABEL] or "passkey"
    challenge = websafe_decode(str(kept.get("challenge", "")))
    if live and not await _stepped_up(gw, live, assertion_of(form), challenge):
        return None, STEP_UP
    try:
        response = json.loads(str(form.get("credential") or ""))
        credential, public_key, counter = passkeys.enrolled(response, challenge, relying_party(gw))
    except (ValueError, passkeys.PasskeyRefused) as refused:
        return None, f"The passkey was not registered: {refused}."
    now = gw.clock()
    key = Passkey(credential, public_key, session.person, session.name, label, now, sign_count=counter)
    if not await gw.store.put_passkey(key):
        return None, "That passkey is registered already; nothing changed."
    await trail.append(gw.store, entries.passkey(key, now, "enrolled", audited(session.person, session.name)))
    return key, f"Your passkey {label!r} is registered: decisions that need a passkey can now be signed with it."


def signing(gw: Gateway, approval: Approval, verdict: str, keys: list[Passkey], person: str) -> dict[str, Any] | None:
    """What a decision form's script asks the authenticator to sign (None: passkeys are not required here)."""
    if not gw.config.passkey_required(approval.tool):
        return None
    url = gw.approvals_url or ""
    challenge = passkeys.challenge_of(passkeys.signed_facts(approval, approval.digest, url, verdict))
    return {
        "challenge": _b64(challenge),
        "rpId": relying_party(gw).rp_id,
        "credentials": [key.credential_id for key in keys if key.revoked_at is None and key.person == person],
    }


def assertion_of(form: FormData) -> dict[str, Any] | None:
    """The assertion the script posted with a decision, if any."""
    try:
        posted = json.loads(str(form.get("assertion") or ""))
    except ValueError:
        return None
    return posted if isinstance(posted, dict) else None


def _b64(data: bytes) -> str:
    return websafe_encode(data)
