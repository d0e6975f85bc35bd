"""Whether a task's caller still stands when the gateway makes its call again, later, for it: the call is authorized
as if the caller called now.

    kept      what a task keeps of the bearer token that made it, never the token itself in clear: a static
              token's SHA-256 (what ``[auth]`` itself holds), any other token sealed with the gateway's secret key
              (AES-GCM under a key derived by HKDF from the first of ``GATEWAY_SECRET_KEY``'s keys; every key
              opens, so a rotation keeps live tasks). A JWT's signature and an introspection's answer can only be
              had again from the token, so it is kept sealed; it is dropped from the task when the task ends
    recheck   the caller as the current config and verifier see the kept credential now: a static token still
              listed in ``[auth]``; a JWT the configured verifier still accepts (signature by a key the issuer
              still publishes, issuer and audience as configured now, not expired, with the configured leeway);
              an introspected token the endpoint still says is active (asked again, never from a cache); the
              same caller (issuer, client, subject) as the task's; and scopes that still cover the tool. Any of
              those failing refuses with ``caller_revoked``, naming which; nothing is written

A task made without a token (stdio, or a gateway without ``[auth]``) is the configured local caller and has nothing
to check. A task that kept no credential (made before this check existed) cannot be vouched for, and is refused.
"""

from __future__ import annotations

import base64
import hashlib
import os
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.hashes import SHA256
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from mcp.server.auth.provider import AccessToken, principal_components

from gateway.config import AuthSection, GatewayConfig
from gateway.errors import AVAILABLE, UNAVAILABLE, Code, ToolError, authorization_denial, scope_hint
from gateway.identity.caller import missing_scopes
from gateway.identity.principal import Principal, encode
from gateway.identity.verifiers import StaticTokens, build_verifier

CREDENTIAL = "credential"
"""The key of a task's identity (gateway.records.Task.identity) that holds what was kept of its token."""
SEALING = b"mcp-safety-gateway/task-credential/v1"


def kept(auth: AuthSection, bearer: str | None, keys: list[bytes]) -> dict[str, str] | None:
    """What a task keeps of the request's bearer token (``Authorization: Bearer ...``), or None without one."""
    if bearer is None or auth.verifier == "none":
        return None
    if auth.verifier == "static":
        return {"sha256": hashlib.sha256(bearer.encode()).hexdigest()}
    nonce = os.urandom(12)
    sealed = AESGCM(_key(keys[0])).encrypt(nonce, bearer.encode(), SEALING)
    return {"sealed": base64.urlsafe_b64encode(nonce + sealed).decode()}


def bearer_of(headers: Any) -> str | None:
    """The bearer token of an HTTP request's headers, or None (stdio, or no such header)."""
    found = headers.get("authorization") if headers is not None else None
    scheme, _, token = (found or "").partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


async def recheck(
    config: GatewayConfig, caller: str, identity: dict[str, Any], tool: str, keys: list[bytes]
) -> dict[str, Any]:
    """The task's identity as it stands now (its scopes as the credential gives them today), or ToolError
    ``caller_revoked`` naming why it no longer stands."""
    if not identity:
        return identity  # the local caller: no token to check
    token = await _verified(config, identity.get(CREDENTIAL), keys)
    if token is None:
        raise _revoked(
            "the credential it called with is no longer accepted (a static token removed from [auth], an"
            " introspected token no longer active, an expired JWT, or a key its issuer no longer publishes)",
            "credential_rejected",
        )
    client, issuer, subject = principal_components(token)
    if encode(Principal(issuer=issuer, client=client, subject=subject)) != caller:
        raise _revoked("its credential now names another caller", "another_caller")
    lacking = missing_scopes(config, tool, set(token.scopes))
    if lacking:
        raise _revoked(
            f"its credential no longer holds the scope {lacking[0]!r} that {tool} needs",
            "scope_missing",
            {"missingScopes": lacking},
            scope_hint(tool, lacking, config.auth.resource_url),
        )
    return {**identity, "scopes": sorted(token.scopes)}


async def _verified(config: GatewayConfig, credential: Any, keys: list[bytes]) -> AccessToken | None:
    """The access token the kept credential stands for now, or None."""
    verifier = build_verifier(config.auth, config.approvals.display_claim)  # a new one: no cached answer
    if verifier is None or not isinstance(credential, dict):
        return None
    if isinstance(verifier, StaticTokens):
        digest = credential.get("sha256")
        return verifier.by_digest(digest) if isinstance(digest, str) else None
    token = opened(credential.get("sealed"), keys)
    return await verifier.verify_token(token) if token is not None else None


def opened(sealed: Any, keys: list[bytes]) -> str | None:
    """A sealed token opened with any of ``keys`` (the current one first), or None."""
    if not isinstance(sealed, str):
        return None
    try:
        raw = base64.urlsafe_b64decode(sealed.encode())
    except ValueError:
        return None
    for key in keys:
        try:
            return AESGCM(_key(key)).decrypt(raw[:12], raw[12:], SEALING).decode()
        except (InvalidTag, ValueError):
            continue
    return None


def _key(secret: bytes) -> bytes:
    return HKDF(algorithm=SHA256(), length=32, salt=None, info=SEALING).derive(secret)


def _revoked(
    why: str, reason: str, details: dict[str, Any] | None = None, hint: dict[str, Any] | None = None
) -> ToolError:
    denial = (
        authorization_denial(AVAILABLE, [hint], credential="replacement") if hint else authorization_denial(UNAVAILABLE)
    )
    return ToolError(
        Code.CALLER_REVOKED,
        f"The call was not made again for this caller: {why}. Nothing was changed; preview again with a"
        " credential that allows it.",
        details={"reason": reason, **(details or {})},
        authorization=denial,
    )
