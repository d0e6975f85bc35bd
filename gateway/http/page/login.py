"""Signing approvers in: at the identity provider (OAuth 2.1 authorization code + PKCE, OpenID Connect), or with
an approver token from the config.

OpenID Connect, as a public client (or a confidential one when a secret is configured): ``start`` sends the
browser to the provider's authorization endpoint with a fresh ``state``, ``nonce`` and S256 code challenge, kept
in a short-lived signed cookie; ``finish`` checks the returned ``state`` against that cookie, redeems the code
with the verifier, and accepts the ID token only when its signature (the provider's JWKS), issuer, audience (our
client id), nonce and expiry hold. The approver is then ``person_id(iss, sub)``: the same person as a caller whose
access token carries that issuer and subject, which is what four eyes compares (gateway/identity/person.py). What
is shown beside the pair is the configured display claim or a verified email, never the self-set ``name``.

Approver tokens: the SHA-256 of the token is compared in constant time with the configured ones; the approver is
``person_id(issuer, subject)`` as the token's entry names them (``static`` when it names no issuer).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import secrets
import time
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlencode

import httpx
import jwt

from gateway.config import ApproverToken, OidcLogin
from gateway.config.environ import current
from gateway.identity.person import display_of, person_id

log = logging.getLogger(__name__)
HTTP_TIMEOUT = 10.0
DISCOVERY_SECONDS = 300.0
MAX_CLAIM_CHARS = 256
"""The longest claim value (or list item) a session keeps for the approver rule; a longer one is not kept."""
MAX_CLAIM_ITEMS = 256
"""The most items of a list claim (``groups``) a session keeps for the approver rule."""


class LoginFailed(Exception):
    """The sign-in did not prove who this is (the reason is logged, never shown in detail)."""


@dataclass(frozen=True)
class Approver:
    """Who signed in: the identity compared for four eyes, and the name the page and audit show."""

    person: str
    """``person_id(issuer, subject)``: who this is, compared for four eyes and counted for ``approvers``."""
    name: str
    """What is shown beside the person (display claim, verified email, or the token's configured name)."""
    facts: dict[str, Any] = field(default_factory=dict)
    """What ``[approvals.approvers]`` is checked against: ``sub``, ``iss``, a verified ``email``, and ``claims``
    (the ID-token claims the rule reads: approver_facts)."""
    via: Literal["oidc", "token"] = "oidc"
    token_sha256: str | None = None
    """For an approver token, the configured token's SHA-256 (a session ends when the config drops it)."""


def approver_facts(claims: dict[str, Any], kept: list[str]) -> dict[str, Any]:
    """The facts of an ID token an approver rule may read: an email only when the provider states it verified,
    and the ``kept`` claims (the rule's, ApproverRule.kept_claims) only as a string, a number, a boolean or a list
    of strings (its first MAX_CLAIM_ITEMS), leaving out any string longer than MAX_CLAIM_CHARS."""
    facts: dict[str, Any] = {"sub": claims.get("sub"), "iss": claims.get("iss"), "claims": {}}
    if isinstance(claims.get("email"), str) and claims.get("email_verified") is True:
        facts["email"] = claims["email"]
    for name in kept:
        held = claims.get(name)
        if isinstance(held, list) and all(isinstance(item, str) for item in held):
            facts["claims"][name] = [item for item in held[:MAX_CLAIM_ITEMS] if len(item) <= MAX_CLAIM_CHARS]
        elif isinstance(held, (bool, int, float)) or (isinstance(held, str) and len(held) <= MAX_CLAIM_CHARS):
            facts["claims"][name] = held
    return facts


def token_approver(tokens: list[ApproverToken], token: str) -> Approver | None:
    """The approver an approver token belongs to, or None."""
    digest = hashlib.sha256(token.encode()).hexdigest()
    for entry in tokens:
        if hmac.compare_digest(digest, entry.sha256):
            facts = {"sub": entry.subject, "iss": entry.issuer}
            person = person_id(entry.issuer, entry.subject)
            return Approver(person, entry.name or entry.subject, facts, via="token", token_sha256=entry.sha256)
    return None


class OidcClient:
    """The approval page as an OpenID Connect client of one provider."""

    def __init__(
        self,
        config: OidcLogin,
        issuer: str,
        redirect_uri: str,
        kept: list[str] | None = None,
        display: str | None = None,
    ) -> None:
        self._config = config
        self._kept = kept or []
        self._display = display
        self._issuer = issuer.rstrip("/")
        self.redirect_uri = redirect_uri
        self._metadata: dict[str, Any] | None = None
        self._fetched_at = 0.0
        self._keys: dict[str, Any] = {}

    async def start(self) -> tuple[str, dict[str, Any]]:
        """Where to send the browser, and what the login cookie must keep until the callback."""
        metadata = await self._discover()
        verifier = secrets.token_urlsafe(48)
        state, nonce = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
        query = {
            "response_type": "code",
            "client_id": self._config.client_id,
            "redirect_uri": self.redirect_uri,
            "scope": " ".join(self._config.scopes),
            "state": state,
            "nonce": nonce,
            "code_challenge": _challenge(verifier),
            "code_challenge_method": "S256",
        }
        kept = {"state": state, "nonce": nonce, "verifier": verifier}
        return f"{metadata['authorization_endpoint']}?{urlencode(query)}", kept

    async def finish(self, code: str, state: str, kept: dict[str, Any]) -> Approver:
        """Redeem the code and check the ID token; LoginFailed when anything does not hold."""
        if not isinstance(kept.get("state"), str) or not hmac.compare_digest(state, kept["state"]):
            raise LoginFailed("state does not match this browser's login")
        metadata = await self._discover()
        form = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": self.redirect_uri,
            "client_id": self._config.client_id,
            "code_verifier": str(kept.get("verifier", "")),
        }
        if self._config.client_secret_env:
            form["client_secret"] = current(self._config.client_secret_env)
        try:
            async with httpx.AsyncClient(timeout=HTTP_TIMEOUT) as http:
                response = await http.post(metadata["token_endpoint"], data=form)
            response.raise_for_status()
            id_token = response.json()["id_token"]
        except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
            raise LoginFailed(f"token endpoint: {type(exc).__name__}") from None
        claims = await self._verified(str(id_token), metadata)
        if not isinstance(kept.get("nonce"), str) or not hmac.compare_digest(str(claims.get("nonce")), kept["nonce"]):
            raise LoginFailed("nonce does not match this browser's login")
        subject = claims.get("sub")
        if not isinstance(subject, str) or not subject:
            raise LoginFailed("no subject")
        facts = approver_facts(claims, self._kept)
        shown = display_of(claims, self._display) or subject
        return Approver(person_id(str(claims["iss"]), subject), shown, facts)

    async def _verified(self, token: str, metadata: dict[str, Any]) -> dict[str, Any]:
        try:
            kid = jwt.get_unverified_header(token).get("kid")
            key = await self._key(kid, metadata)
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=["RS256", "PS256", "ES256", "EdDSA"],
                audience=self._config.client_id,
                issuer=metadata["issuer"],
                leeway=30,
                options={"require": ["exp", "iat", "iss", "aud", "sub"]},
            )
        except (jwt.PyJWTError, httpx.HTTPError, ValueError, KeyError) as exc:
            raise LoginFailed(f"id token: {type(exc).__name__}") from None
        return claims

    async def _key(self, kid: str | None, metadata: dict[str, Any]) -> Any:
        if kid not in self._keys:  # a new kid: the provider rotated its keys
            async with httpx.AsyncClient(timeout=HTTP_TIMEOUT) as http:
                response = await http.get(metadata["jwks_uri"])
            response.raise_for_status()
            found = jwt.PyJWKSet.from_dict(response.json()).keys
            self._keys = {entry.key_id: entry.key for entry in found if entry.key_id is not None}
        if kid is None and len(self._keys) == 1:
            return next(iter(self._keys.values()))
        if kid not in self._keys:
            raise LoginFailed("unknown signing key")
        return self._keys[kid]

    async def _discover(self) -> dict[str, Any]:
        if self._metadata is not None and time.monotonic() - self._fetched_at < DISCOVERY_SECONDS:
            return self._metadata
        url = f"{self._issuer}/.well-known/openid-configuration"
        try:
            async with httpx.AsyncClient(timeout=HTTP_TIMEOUT) as http:
                response = await http.get(url)
            response.raise_for_status()
            metadata = response.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise LoginFailed(f"discovery: {type(exc).__name__}") from None
        needed = ("issuer", "authorization_endpoint", "token_endpoint", "jwks_uri")
        if not isinstance(metadata, dict) or not all(isinstance(metadata.get(key), str) for key in needed):
            raise LoginFailed("discovery document lacks an endpoint")
        if metadata["issuer"].rstrip("/") != self._issuer:
            raise LoginFailed("discovery names another issuer")
        self._metadata, self._fetched_at = metadata, time.monotonic()
        return metadata


def _challenge(verifier: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
