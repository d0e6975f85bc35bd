"""The approver's session, kept in the store and named by a signed ``__Host-`` cookie; and the login's
short-lived signed state.

The session lives in the store (gateway/stores/base.py, ``ApproverSessions``) under the SHA-256 of a random
secret; the cookie holds only that secret and its expiry, HMAC-signed with a key derived from the gateway's key
ring (gateway/identity/secrets.py) *and the page's public URL*. So:

- every replica reads the same session, and a sign-out (or the operator's ``approvals sessions --revoke``) ends it
  on all of them at once; the store never holds what the browser presents;
- a second gateway that shares ``GATEWAY_SECRET_KEY`` but serves another public URL (staging beside production)
  derives other keys and refuses the first one's cookies, and a session is accepted only at the URL it was
  issued for;
- each request checks the session against the config as it is now (``still_holds``): a token removed from
  ``[[approvals.tokens]]`` (or naming another person now), or a sign-in at a provider the config no longer
  names, ends it; whether the person may decide is checked on every decision against ``[approvals.approvers]``
  (gateway/http/page/decisions.py).

``__Host-`` cookies are Secure, Path=/ and have no Domain: no other host or path can set or shadow them. The
session carries a CSRF token that every form posts back.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from typing import Any

from gateway.config import GatewayConfig
from gateway.http.page.login import Approver
from gateway.identity.person import person_id, person_parts
from gateway.records import ApproverSession
from gateway.runtime import Gateway

SESSION_COOKIE = "__Host-gateway-approver"
LOGIN_COOKIE = "__Host-gateway-login"
LOGIN_SECONDS = 600


class Signer:
    """Signs with the newest key; accepts any key of the ring. ``purpose`` keeps cookies of one kind (or for one
    public URL) from being accepted as another."""

    def __init__(self, keys: list[bytes], purpose: str) -> None:
        label = f"gateway/approvals/{purpose}/v1:".encode()
        self._keys = [hashlib.sha256(label + key).digest() for key in keys]

    def sign(self, data: dict[str, Any]) -> str:
        """A cookie value holding ``data``."""
        body = base64.urlsafe_b64encode(json.dumps(data, separators=(",", ":")).encode()).decode().rstrip("=")
        return f"{body}.{self._tag(self._keys[0], body)}"

    def unsign(self, value: str | None, now: float) -> dict[str, Any] | None:
        """The data of a cookie this gateway signed and that has not expired (its ``exp``), else None."""
        if not value or not value.isascii() or "." not in value:
            return None
        body, _, tag = value.rpartition(".")
        if not any(hmac.compare_digest(self._tag(key, body), tag) for key in self._keys):
            return None
        try:
            data = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
        except ValueError:
            return None
        if not isinstance(data, dict) or not isinstance(data.get("exp"), int | float) or data["exp"] <= now:
            return None
        return data

    @staticmethod
    def _tag(key: bytes, body: str) -> str:
        digest = hmac.new(key, body.encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def session_id(secret: str) -> str:
    """The id a session is stored (and listed, and revoked) under: the SHA-256 of the cookie's secret."""
    digest = hashlib.sha256(b"gateway/approver-session/v1:" + secret.encode()).digest()
    return "as_" + base64.urlsafe_b64encode(digest).decode().rstrip("=")[:22]


def still_holds(session: ApproverSession, config: GatewayConfig, audience: str | None) -> bool:
    """Whether a stored session still stands for a way in the config offers now, at this page's URL."""
    if audience is None or session.audience != audience:
        return False
    approvals = config.approvals
    if session.via == "token":
        entry = next((token for token in approvals.tokens if token.sha256 == session.token_sha256), None)
        return entry is not None and person_id(entry.issuer, entry.subject) == session.person
    issuer = config.oidc_issuer()
    parts = person_parts(session.person)
    return (
        approvals.login == "oidc"
        and issuer is not None
        and parts is not None
        and person_id(issuer, parts[1]) == session.person
    )


class Sessions:
    """Starts, reads and ends approver sessions in the gateway's store."""

    def __init__(self, gw: Gateway) -> None:
        self.gw = gw
        self.audience = gw.approvals_url
        self._signer = Signer(gw.keys, f"session:{self.audience}")

    async def start(self, approver: Approver) -> tuple[ApproverSession, str]:
        """A new session for a person who just signed in (fresh CSRF token), and its cookie value."""
        now = self.gw.clock()
        secret = secrets.token_urlsafe(32)
        session = ApproverSession(
            session_id=session_id(secret),
            person=approver.person,
            name=approver.name,
            via=approver.via,
            audience=self.audience or "",
            csrf=secrets.token_urlsafe(24),
            created_at=now,
            expires_at=now + self.gw.config.approvals.session_seconds,
            facts=approver.facts,
            token_sha256=approver.token_sha256,
        )
        await self.gw.store.put_session(session)
        return session, self._signer.sign({"secret": secret, "exp": session.expires_at})

    async def read(self, cookie: str | None) -> ApproverSession | None:
        """The live session a cookie names, if it still holds; None otherwise (never a reason: the page asks the
        person to sign in again)."""
        now = self.gw.clock()
        data = self._signer.unsign(cookie, now)
        if data is None or not isinstance(data.get("secret"), str):
            return None
        found = await self.gw.store.get_session(session_id(data["secret"]), now)
        if found is None or not still_holds(found, self.gw.config, self.audience):
            return None
        return found

    async def end(self, cookie: str | None) -> None:
        """Sign-out: delete the session the cookie names from the store."""
        data = self._signer.unsign(cookie, self.gw.clock())
        if data is not None and isinstance(data.get("secret"), str):
            await self.gw.store.delete_session(session_id(data["secret"]))
