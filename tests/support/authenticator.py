"""A software WebAuthn authenticator for unit tests: an ES256 key that registers and signs as a CTAP2
authenticator would (attestation "none"), with user verification switchable, so forged and honest assertions
can be made without a browser. The browser tests use Chromium's virtual authenticator instead
(tests/support/webauthn.py)."""

from __future__ import annotations

import hashlib
import json
import os
import struct
from dataclasses import dataclass, field
from typing import Any

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from fido2 import cbor
from fido2.cose import ES256
from fido2.utils import websafe_decode, websafe_encode

UP, UV, AT = 0x01, 0x04, 0x40


@dataclass
class SoftAuthenticator:
    """One credential on one authenticator."""

    rp_id: str
    origin: str
    key: ec.EllipticCurvePrivateKey = field(default_factory=lambda: ec.generate_private_key(ec.SECP256R1()))
    credential_id: bytes = field(default_factory=lambda: os.urandom(16))
    counter: int = 0
    verified: bool = True

    @property
    def credential(self) -> str:
        return websafe_encode(self.credential_id)

    def register(self, challenge: bytes) -> dict[str, Any]:
        """A registration response for ``challenge``, as the page's script posts it."""
        cose = dict(ES256.from_cryptography_key(self.key.public_key()))  # type: ignore[no-untyped-call]
        attested = bytes(16) + struct.pack(">H", len(self.credential_id)) + self.credential_id + cbor.encode(cose)
        data = self._auth_data(AT) + attested
        attestation = cbor.encode({"fmt": "none", "attStmt": {}, "authData": data})
        return {
            "credentialId": self.credential,
            "clientDataJSON": self._client_data("webauthn.create", challenge),
            "attestationObject": websafe_encode(attestation),
        }

    def sign(self, challenge: bytes, *, origin: str | None = None, rp_id: str | None = None) -> dict[str, str]:
        """An assertion over ``challenge`` (another origin or relying party, for forgeries)."""
        self.counter += 1
        data = self._auth_data(0, rp_id)
        client = self._client_data("webauthn.get", challenge, origin)
        signed = data + hashlib.sha256(websafe_decode(client)).digest()
        signature = self.key.sign(signed, ec.ECDSA(hashes.SHA256()))
        return {
            "credentialId": self.credential,
            "authenticatorData": websafe_encode(data),
            "clientDataJSON": client,
            "signature": websafe_encode(signature),
        }

    def _auth_data(self, extra: int, rp_id: str | None = None) -> bytes:
        flags = UP | (UV if self.verified else 0) | extra
        rp_hash = hashlib.sha256((rp_id or self.rp_id).encode()).digest()
        return rp_hash + bytes([flags]) + struct.pack(">I", self.counter)

    def _client_data(self, kind: str, challenge: bytes, origin: str | None = None) -> str:
        body = {"type": kind, "challenge": websafe_encode(challenge), "origin": origin or self.origin}
        return websafe_encode(json.dumps({**body, "crossOrigin": False}).encode())
