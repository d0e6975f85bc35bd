"""Bearer-token verifiers for the HTTP transport: static hashes, JWT (JWKS or PEM), RFC 7662 introspection.

Each turns a token into the SDK's ``AccessToken`` (client id, subject, scopes) or None. The gateway is a
resource server only: it never forwards the token anywhere but to its own introspection endpoint, never logs
it, and keeps no copy (``AccessToken.token`` holds a short fingerprint instead). PyJWT and httpx are imported where a
verifier needs them: a gateway with static tokens, or none, never holds them (about 6 MiB of a worker, with what
httpx imports).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import time
from pathlib import Path
from typing import Any

from cachetools import TTLCache
from mcp.server.auth.provider import AccessToken, TokenVerifier

from gateway.config import AuthSection, IntrospectionVerifier, JwtVerifier, StaticToken
from gateway.config.environ import current
from gateway.identity.person import DISPLAY, PERSON_ISSUER, display_of

log = logging.getLogger(__name__)
HTTP_TIMEOUT = 10.0


def fingerprint(token: str) -> str:
    """A short, non-reversible name for a token, for the rare log line that needs one."""
    return "sha256:" + hashlib.sha256(token.encode()).hexdigest()[:12]


class StaticTokens:
    """Tokens listed in the config by their SHA-256; compared in constant time."""

    def __init__(self, tokens: list[StaticToken], resource: str) -> None:
        self._tokens = tokens
        self._resource = resource

    async def verify_token(self, token: str) -> AccessToken | None:
        return self.by_digest(hashlib.sha256(token.encode()).hexdigest())

    def by_digest(self, digest: str) -> AccessToken | None:
        """The access token of the listed token whose SHA-256 is ``digest`` (a task's kept credential:
        gateway.identity.standing), or None."""
        for entry in self._tokens:
            if hmac.compare_digest(digest, entry.sha256):
                return AccessToken(
                    token="sha256:" + digest[:12],
                    client_id=entry.client_id,
                    subject=entry.subject,
                    scopes=list(entry.scopes),
                    resource=self._resource,
                    claims={PERSON_ISSUER: entry.issuer} if entry.issuer is not None else None,
                )
        return None


class JwtTokens:
    """Signed JWT access tokens: issuer, audience (this gateway's resource URL), expiry and not-before."""

    def __init__(self, config: JwtVerifier, resource: str, display_claim: str | None = None) -> None:
        self._config = config
        self._display_claim = display_claim
        self._audience = config.audience or resource
        self._static_key: Any = None
        if config.public_key_file is not None:
            self._static_key = Path(config.public_key_file).read_bytes()  # PEM; PyJWT prepares it per algorithm
        self._keys: dict[str, Any] = {}
        self._fetched_at = 0.0

    async def verify_token(self, token: str) -> AccessToken | None:
        import httpx
        import jwt

        try:
            header = jwt.get_unverified_header(token)
            key = self._static_key or await self._key_for(header.get("kid"))
            if key is None:
                return None
            claims = jwt.decode(
                token,
                key,
                algorithms=self._config.algorithms,
                audience=self._audience,
                issuer=self._config.issuer,
                leeway=self._config.leeway_seconds,
                options={"require": ["exp", "iss", "aud"]},
            )
        except (jwt.PyJWTError, httpx.HTTPError, ValueError) as exc:
            log.info("jwt refused (%s) for token %s", type(exc).__name__, fingerprint(token))
            return None
        return _access_token(token, claims, self._audience, claims["iss"], self._display_claim)

    async def _key_for(self, kid: str | None) -> Any:
        age = time.monotonic() - self._fetched_at
        # An unknown kid refreshes the set (key rotation), at most once a second.
        if (kid not in self._keys or age > self._config.jwks_cache_seconds) and age > 1.0:
            await self._fetch()
        if kid is None and len(self._keys) == 1:
            return next(iter(self._keys.values()))
        return self._keys.get(kid) if kid is not None else None

    async def _fetch(self) -> None:
        import httpx
        import jwt

        assert self._config.jwks_url is not None
        async with httpx.AsyncClient(timeout=HTTP_TIMEOUT) as http:
            response = await http.get(self._config.jwks_url)
            response.raise_for_status()
        keys = {}
        for entry in jwt.PyJWKSet.from_dict(response.json()).keys:
            if entry.key_id is not None:
                keys[entry.key_id] = entry.key
        self._keys = keys
        self._fetched_at = time.monotonic()


class IntrospectedTokens:
    """Opaque tokens checked at an RFC 7662 endpoint with the gateway's own client credentials. An active token
    counts only when its ``aud`` names this gateway (``audience``, else ``resource_url``) and, with ``issuer``
    configured, its ``iss`` is that issuer."""

    def __init__(self, config: IntrospectionVerifier, resource: str, display_claim: str | None = None) -> None:
        self._config = config
        self._display_claim = display_claim
        self._resource = resource
        self._audience = config.audience or resource
        self._cache: TTLCache[str, AccessToken | None] = TTLCache(maxsize=10_000, ttl=max(config.cache_seconds, 0.001))

    async def verify_token(self, token: str) -> AccessToken | None:
        key = hashlib.sha256(token.encode()).hexdigest()
        if self._config.cache_seconds > 0 and key in self._cache:
            return self._cache[key]
        result = await self._introspect(token)
        if self._config.cache_seconds > 0:
            self._cache[key] = result
        return result

    async def _introspect(self, token: str) -> AccessToken | None:
        import httpx

        auth = None
        if self._config.client_id_env and self._config.client_secret_env:
            auth = httpx.BasicAuth(current(self._config.client_id_env), current(self._config.client_secret_env))
        try:
            async with httpx.AsyncClient(timeout=HTTP_TIMEOUT) as http:
                response = await http.post(
                    self._config.endpoint, data={"token": token}, auth=auth or httpx.USE_CLIENT_DEFAULT
                )
            response.raise_for_status()
            claims = response.json()
        except (httpx.HTTPError, ValueError) as exc:
            log.warning("introspection failed (%s)", type(exc).__name__)
            return None
        if not isinstance(claims, dict) or claims.get("active") is not True:
            return None
        expires = claims.get("exp")
        if isinstance(expires, int | float) and expires < time.time():
            return None
        if self._audience not in _audiences(claims):
            return None  # active, but issued for another API (or for none in particular)
        issuer = claims.get("iss")
        if self._config.issuer is not None and issuer != self._config.issuer:
            return None
        # Without an "iss" the endpoint's own URL names the authority that vouched for the token.
        authority = issuer if isinstance(issuer, str) else self._config.endpoint
        return _access_token(token, claims, self._resource, authority, self._display_claim)


def build_verifier(auth: AuthSection, display_claim: str | None = None) -> TokenVerifier | None:
    """The configured verifier, or None when the gateway runs without authentication. ``display_claim`` is the
    claim a token's holder is shown by on the approval page (else a verified email)."""
    if auth.verifier == "none":
        return None
    assert auth.resource_url is not None
    if auth.verifier == "static":
        return StaticTokens(auth.tokens, auth.resource_url)
    if auth.verifier == "jwt":
        assert auth.jwt is not None
        return JwtTokens(auth.jwt, auth.resource_url, display_claim)
    assert auth.introspection is not None
    return IntrospectedTokens(auth.introspection, auth.resource_url, display_claim)


def _audiences(claims: dict[str, Any]) -> list[Any]:
    audience = claims.get("aud")
    return audience if isinstance(audience, list) else [audience]


def _access_token(
    token: str, claims: dict[str, Any], resource: str, issuer: str, display_claim: str | None = None
) -> AccessToken | None:
    client_id = claims.get("client_id") or claims.get("azp") or claims.get("cid") or claims.get("sub")
    if not isinstance(client_id, str) or not client_id:
        return None
    scope = claims.get("scope", claims.get("scp", []))
    scopes = (
        scope.split() if isinstance(scope, str) else [str(item) for item in scope] if isinstance(scope, list) else []
    )
    subject = claims.get("sub")
    expires = claims.get("exp")
    return AccessToken(
        token=fingerprint(token),
        client_id=client_id,
        subject=subject if isinstance(subject, str) and subject != client_id else None,
        scopes=scopes,
        expires_at=int(expires) if isinstance(expires, int | float) else None,
        resource=resource,
        # The caller's first part (gateway.identity.caller; the SDK's principal reads it too), and what the approval
        # page shows beside the person: nothing else of the token is kept.
        claims={"iss": issuer, **({DISPLAY: shown} if (shown := display_of(claims, display_claim)) else {})},
    )
