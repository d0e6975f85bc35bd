"""One signature for what the gateway POSTs to others: approval notices and the audit stream.

``X-Gateway-Signature: t=TIMESTAMP,v1=HEX`` where HEX is HMAC-SHA256(secret, ``TIMESTAMP.BODY``); a receiver
recomputes it over the raw body and rejects old timestamps. Stdlib only.
"""

from __future__ import annotations

import hashlib
import hmac

SIGNATURE_HEADER = "X-Gateway-Signature"


def signature(secret: bytes, timestamp: int, body: bytes) -> str:
    """The value of the signature header for ``body`` sent at ``timestamp`` (approval notices and the audit
    stream sign alike)."""
    mac = hmac.new(secret, f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={mac}"
