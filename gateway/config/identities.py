"""Which identity spaces a config's callers and approvers come from, and whether they are one.

Four eyes compares a caller with an approver, and ``approvers = N`` counts distinct approvers, as the pair
(issuer, subject) (gateway/identity/person.py). That comparison means something only where both sides name the same
issuer for the same person: a caller ``dana`` at ``https://login.example.com`` and an approver token whose subject
is ``dana`` but whose issuer is ``static`` are two people to the gateway, so dana could approve her own write, and
one person holding a token and a sign-in would count twice. So ``check`` and ``serve`` refuse a tool with four eyes
unless every caller and every approver comes from one issuer, and a tool with ``approvers > 1`` unless every
approver does:

    callers    static tokens   each token's ``issuer`` (unset: ``static``)
               JWT             ``auth.jwt.issuer``
               introspection   ``auth.introspection.issuer`` (unset: whatever the endpoint answers; never comparable)
    approvers  approver tokens each token's ``issuer`` (unset: ``static``)
               sign-in         the OpenID provider's issuer (``login = "oidc"``)
"""

from __future__ import annotations

from collections.abc import Iterable

from gateway.config.approvals import ApprovalsSection
from gateway.config.sections import STATIC_ISSUER, AuthSection

Space = dict[str, str]
"""Issuer (without a trailing slash) -> the config key it comes from."""


def caller_space(auth: AuthSection) -> Space | None:
    """The issuers callers can have, or None when they cannot be known in advance (introspection, no issuer)."""
    if auth.verifier == "static":
        return _space((token.issuer or STATIC_ISSUER, f"auth.tokens.{n}.issuer") for n, token in enumerate(auth.tokens))
    if auth.verifier == "jwt" and auth.jwt is not None:
        return _space([(auth.jwt.issuer, "auth.jwt.issuer")])
    if auth.verifier == "introspection" and auth.introspection is not None:
        issuer = auth.introspection.issuer
        return None if issuer is None else _space([(issuer, "auth.introspection.issuer")])
    return {}


def approver_space(approvals: ApprovalsSection, oidc_issuer: str | None) -> Space:
    """The issuers approvers can have: each approver token's, and the provider's where they sign in there."""
    named = [(token.issuer, f"approvals.tokens.{n}.issuer") for n, token in enumerate(approvals.tokens)]
    if approvals.login == "oidc" and oidc_issuer is not None:
        named.append((oidc_issuer, "approvals.oidc.issuer"))
    return _space(named)


def space_refusal(
    tool: str, four_eyes: bool, approvers: int, auth: AuthSection, approvals: ApprovalsSection, oidc: str | None
) -> str | None:
    """Why a url-mode tool's four eyes or approver count cannot be kept with these identity sources, or None."""
    deciding = approver_space(approvals, oidc)
    if four_eyes:
        calling = caller_space(auth)
        if calling is None:
            return (
                f"tools.{tool}.four_eyes with an introspection verifier needs auth.introspection.issuer: without it a "
                "caller's issuer is whatever the endpoint answers, and cannot be compared with an approver's"
            )
        if len({**calling, **deciding}) > 1:
            return (
                f"tools.{tool}.four_eyes: callers and approvers come from different identity spaces "
                f"({_named({**calling, **deciding})}), so a person could approve their own write under another "
                "identity; give every token the issuer of the person it stands for (the keys named)"
            )
    if approvers > 1 and len(deciding) > 1:
        return (
            f"tools.{tool}.approvers = {approvers} counts distinct people, and approvers come from different identity "
            f"spaces ({_named(deciding)}), so one person could count twice; give every approver token the issuer of "
            "the person it stands for (the keys named)"
        )
    return None


def _space(named: Iterable[tuple[str, str]]) -> Space:
    space: Space = {}
    for issuer, key in named:
        space.setdefault(issuer.rstrip("/") or issuer, key)
    return space


def _named(space: Space) -> str:
    return ", ".join(f"{issuer!r} from {key}" for issuer, key in sorted(space.items()))
