"""The approver's session and the login's short-lived state: signed ``__Host-`` cookies.

A cookie holds JSON, base64url-encoded, and an HMAC-SHA256 over it with a key derived from the gateway's key
ring (gateway/identity/secrets.py, so every replica accepts it and a rotation keeps it valid while the old key
is listed).
``__Host-`` cookies are Secure, Path=/ and have no Domain: no other host or path can set or shadow them.
The session carries the approver's identity and a CSRF token that every form posts back.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass, field
from typing import Any

SESSION_COOKIE = "__Host-gateway-approver"
LOGIN_COOKIE = "__Host-gateway-login"
LOGIN_SECONDS = 600


@dataclass(frozen=True)
class Session:
    """A signed-in approver."""

    person: str
    name: str
    csrf: str
    expires_at: float
    facts: dict[str, Any] = field(default_factory=dict)
    """What the approver rule is checked against on every decision (gateway/http/page/login.py)."""


class Signer:
    """Signs with the newest key; accepts any key of the ring. ``purpose`` keeps cookies of one kind from
    being accepted as another."""

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


class Sessions:
    """Issues and reads approver sessions."""

    def __init__(self, keys: list[bytes], seconds: float) -> None:
        self._signer = Signer(keys, "session")
        self._seconds = seconds

    def issue(self, person: str, name: str, now: float, facts: dict[str, Any] | None = None) -> tuple[Session, str]:
        """A new session (fresh CSRF token) and its cookie value."""
        session = Session(person, name, secrets.token_urlsafe(24), now + self._seconds, facts or {})
        data = {"person": person, "name": name, "csrf": session.csrf, "exp": session.expires_at, "facts": session.facts}
        return session, self._signer.sign(data)

    def read(self, value: str | None, now: float) -> Session | None:
        """The session a cookie holds, or None."""
        data = self._signer.unsign(value, now)
        if data is None or not all(isinstance(data.get(name), str) for name in ("person", "name", "csrf")):
            return None
        facts = data.get("facts")
        return Session(
            data["person"], data["name"], data["csrf"], float(data["exp"]), facts if isinstance(facts, dict) else {}
        )
