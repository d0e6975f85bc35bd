"""A person: the (issuer, subject) pair that callers and approvers are compared as, in one space.

A caller's token (static, JWT, introspected) and an approver's sign-in (an ID token, or an approver token whose
config entry names the issuer and subject it stands for) each stand for one person, written ``person_id(issuer,
subject)``. Four eyes compares these strings and ``approvers = N`` counts distinct ones, so the same person
reached through two identity sources is one person exactly when both name the same issuer and subject; ``check``
refuses a config whose sources cannot meet (gateway.config). A name a person chose for themselves (the ID token's
``name``) is never part of it: the audit records the pair, with a verified email or the configured display claim
beside it (``audited``).

Beside the standard library it reads only the config's STATIC_ISSUER: the audit listing renders people without
loading the HTTP stack.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from gateway.config.sections import STATIC_ISSUER

__all__ = [
    "DISPLAY",
    "PERSON_ISSUER",
    "STATIC_ISSUER",
    "audited",
    "display_of",
    "names",
    "person_id",
    "person_parts",
    "readable_person",
]

DISPLAY = "gateway_display"
"""The access-token claim a caller's display (``display_of``) travels in to ``current_display``."""
PERSON_ISSUER = "gateway_person_issuer"
"""The access-token claim a static token's configured ``issuer`` travels in to ``current_person``; not ``iss``: the
token was not issued there, and the caller it makes stays (none, client, subject)."""


def person_id(issuer: str, subject: str) -> str:
    """One unambiguous string for (issuer, subject); an issuer's trailing slash is not part of it."""
    return json.dumps([issuer.rstrip("/") or issuer, subject], separators=(",", ":"))


def display_of(claims: dict[str, Any], display_claim: str | None) -> str | None:
    """What is shown beside a person's (issuer, subject), from their token's claims: the configured display claim,
    else the email the issuer states verified (``email_verified: true``), else nothing. Never the ``name`` claim
    unless the operator chose it: people set it themselves ("Bob Builder")."""
    chosen = claims.get(display_claim) if display_claim is not None else None
    if isinstance(chosen, str) and chosen.strip():
        return chosen[:128]
    email = claims.get("email")
    return email[:128] if isinstance(email, str) and email and claims.get("email_verified") is True else None


def person_parts(person: str) -> tuple[str, str] | None:
    """The (issuer, subject) a person id holds, or None for anything else."""
    try:
        parts = json.loads(person)
    except ValueError:
        return None
    if isinstance(parts, list) and len(parts) == 2 and all(isinstance(part, str) for part in parts):
        return parts[0], parts[1]
    return None


def audited(person: str, display: str | None = None) -> dict[str, Any]:
    """A person as the audit keeps them: ``issuer`` and ``subject``, and ``display`` (a verified email or the
    configured display claim) when there is one that is not the subject itself."""
    issuer, subject = person_parts(person) or ("", person)
    kept: dict[str, Any] = {"issuer": issuer, "subject": subject}
    if display and display != subject:
        kept["display"] = display
    return kept


def readable_person(kept: Any) -> str:
    """A kept person as a person reads it: ``alice (https://login.example.com) <alice@example.com>``. The subject
    is percent-escaped where it holds a space, bracket or quote, so the pair always reads first and whole; the
    display follows in angle brackets. A plain string (an entry written before people were kept as pairs) shows
    quoted. Not escaped for a terminal here: the caller's renderer does that (gateway.text)."""
    if not isinstance(kept, dict):
        return json.dumps(str(kept), ensure_ascii=False)
    subject = quote(str(kept.get("subject", "")), safe=":@+=!$&'*,;~/")
    issuer = str(kept.get("issuer", ""))
    shown = STATIC_ISSUER if issuer == STATIC_ISSUER else quote(issuer, safe=":/?#[]@!$&'*+,;=~")
    display = kept.get("display")
    return f"{subject} ({shown})" + (f" <{display}>" if display else "")


def names(asked: str | None, person: str) -> bool:
    """Whether an operator's ``--person`` names this person: the subject, or ``subject (issuer)`` as the
    operator's lists show it (``approvals sessions``, ``approvals passkeys``)."""
    if asked is None:
        return False
    kept = audited(person)
    return asked in (kept["subject"], readable_person(kept))
