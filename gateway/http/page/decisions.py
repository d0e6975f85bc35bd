"""What the page's two faces (the HTML forms and the approvers' JSON API) share: the headers every answer carries,
approver tokens checked under their rate limits, and recording one person's decision.

Approver-token attempts (the page's token sign-in, every call of the JSON API), right or wrong, each take one
token from three buckets in the store, in turn, and stop at the first that is empty: the source's (an IPv4
address, an IPv6 /64: gateway/http/proxies.py; the peer, or the client a trusted proxy names) and the token's (by
a digest, so the bucket's name reveals nothing), each refilled at ``[approvals] token_attempts_per_minute``, then
one for every attempt from anywhere, refilled at ``token_attempts_per_minute_total``. One stolen token tried from
many addresses meets the token's bucket; guesses from many addresses or networks meet the ceiling. The buckets
are shared by every replica on a shared store.

A decision is stored with a compare-and-set on the approval's revision, retried when another decision landed
first, so two approvers deciding at once on two replicas both count (or one is refused by the rules), never lost.
Each stored decision leaves one audit entry (``outcome = "approval"``): ``extra.approver`` is the person's issuer and
subject, with the verified email or display claim shown beside them (gateway/identity/person.py).
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import replace
from typing import Any, Literal, Protocol

from starlette.requests import Request

from gateway.approvals import passkeys
from gateway.approvals.lifecycle import DecisionRefused, Refused, State, decide, state
from gateway.audit import entries, trail
from gateway.errors import StoreUnavailable
from gateway.http.page.login import Approver, token_approver
from gateway.http.proxies import source_key
from gateway.identity.person import audited
from gateway.records import Approval
from gateway.runtime import Gateway

HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; script-src 'self'; form-action 'self'; frame-ancestors 'none';"
        " base-uri 'none'"
    ),
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",  # no-referrer would make the browser send Origin: null on our own POSTs
    "X-Frame-Options": "DENY",
}
log = logging.getLogger(__name__)
ATTEMPTS = 8
"""How many times a decision is tried against approvals that keep changing before the store counts as failing."""


class Person(Protocol):
    """Who decides: a signed-in session or an approver token's holder."""

    @property
    def person(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def facts(self) -> dict[str, Any]: ...


class TooManyAttempts(Exception):
    """Approver-token attempts from this source, or with this token, came faster than the config allows."""

    def __init__(self, retry_after: float) -> None:
        super().__init__(f"retry after {retry_after:.0f} s")
        self.retry_after = retry_after


def source_of(request: Request) -> str:
    """Where a request came from, as the attempt limits count it: the client the edge admitted (the peer, or the
    client a trusted proxy named), an IPv6 one by its /64."""
    return source_key(request.client.host) if request.client is not None else "unknown"


async def approver_by_token(gw: Gateway, source: str, token: str) -> Approver | None:
    """The approver an approver token belongs to (None: no such token), counted against the attempt limits;
    TooManyAttempts at the first empty bucket (nothing is compared then)."""
    approvals = gw.config.approvals
    rate, total = approvals.token_attempts_per_minute, approvals.token_attempts_per_minute_total
    digest = hashlib.sha256(b"gateway/approver-attempt/v1:" + token.encode()).hexdigest()[:32]
    now = gw.clock()
    for bucket, per_minute in (("source:" + source, rate), ("token:" + digest, rate), ("all", total)):
        wait = await gw.store.take_token(f"approver-token:{bucket}", per_minute / 60, per_minute, now)
        if wait > 0:
            raise TooManyAttempts(wait)
    return token_approver(approvals.tokens, token)


async def record(
    gw: Gateway,
    approval_id: str,
    who: Person,
    verdict: Literal["approve", "reject"],
    assertion: dict[str, Any] | None = None,
) -> tuple[Approval | None, Refused | None]:
    """Record one person's decision: the approval after it (None: no such approval), or why it was refused. The
    person is checked against the current ``[approvals.approvers]`` first, on every decision; with passkeys
    required for the tool, so is ``assertion``: their own enrolled, unrevoked passkey's signature over this
    decision's challenge (gateway.approvals.passkeys), its counter moved on in the store before the decision is."""
    person, name = who.person, who.name
    signed: tuple[dict[str, str], dict[str, Any]] | None = None
    for _ in range(ATTEMPTS):
        current = await gw.store.get_approval(approval_id)
        if current is None:
            return None, None
        if not gw.config.approvals.approvers.admits(who.facts):
            return current, Refused.NOT_AN_APPROVER
        now = gw.clock()
        if signed is None and gw.config.passkey_required(current.tool):
            # Checked once: a retry after a lost compare-and-set keeps it (what it signed does not change with the
            # approval's revision, and its counter is already stored).
            signed = await _signed(gw, current, person, verdict, assertion)
            if signed is None:
                return current, Refused.UNSIGNED
        try:
            changed = decide(current, person, name, verdict, now, signed[0] if signed is not None else None)
        except DecisionRefused as refused:
            return current, refused.reason
        if changed is current:
            return current, None  # the same answer again: nothing to store
        if await gw.store.replace_approval(changed):
            evidence = {"passkey": {**signed[0], "signed": signed[1]}} if signed is not None else {}
            await trail.append(gw.store, entries.approval(changed, now, audited(person, name), verdict, **evidence))
            settled = state(changed, now)
            if settled in (State.APPROVED, State.REJECTED):
                gw.metrics.decision_seconds.labels(settled.value).observe(now - changed.requested_at)
            return changed, None
    raise StoreUnavailable("the approval kept changing under this decision")


async def _signed(
    gw: Gateway, approval: Approval, person: str, verdict: str, assertion: dict[str, Any] | None
) -> tuple[dict[str, str], dict[str, Any]] | None:
    """The assertion as a decision keeps it and the facts it signed, when it is ``person``'s own enrolled passkey
    signing this decision; None otherwise (logged with the check that failed). The passkey's counter is stored
    first: an assertion is used once."""
    if not isinstance(assertion, dict):
        return None
    passkey = await gw.store.get_passkey(str(assertion.get("credentialId", "")))
    if passkey is None or passkey.revoked_at is not None or passkey.person != person:
        log.info("passkey decision refused: the credential is not an enrolled, unrevoked passkey of this person")
        return None
    url = gw.approvals_url or ""
    facts = passkeys.signed_facts(approval, approval.digest, url, verdict)
    challenge = passkeys.challenge_of(facts)
    try:
        counter = passkeys.verify(assertion, passkey, challenge, passkeys.relying_party(url))
    except passkeys.PasskeyRefused as refused:
        log.info("passkey decision refused: %s", refused)
        return None
    if not await gw.store.replace_passkey(replace(passkey, sign_count=counter)):
        log.info("passkey decision refused: the passkey was used or changed at the same time")
        return None
    return passkeys.kept(assertion), facts
