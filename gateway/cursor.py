"""Opaque list cursors: an HMAC-signed keyset position (the last id seen), valid across restarts."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

from gateway.errors import Code, ToolError

_LABEL = b"gateway/list-cursor/v1:"


class CursorCodec:
    """Signs with the first key; accepts any key of the ring."""

    def __init__(self, keys: list[bytes]) -> None:
        self._keys = [hashlib.sha256(_LABEL + key).digest() for key in keys]

    def encode(self, tool: str, last: str | int) -> str:
        """A cursor meaning 'after the item whose sort key is ``last``' for one tool."""
        body = _b64(json.dumps({"t": tool, "after": last}, separators=(",", ":")).encode())
        return f"{body}.{_b64(self._sign(self._keys[0], body))}"

    def decode(self, tool: str, cursor: str) -> str | int:
        """The sort key a cursor stands for; ToolError invalid_cursor for anything not minted here."""
        body, _, tag = cursor.partition(".")
        # Minted cursors are ASCII; compare_digest refuses other strings (TypeError), so they stop here.
        if cursor.isascii() and any(hmac.compare_digest(_b64(self._sign(key, body)), tag) for key in self._keys):
            data = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
            after = data.get("after")
            if data.get("t") == tool and isinstance(after, str | int) and not isinstance(after, bool):
                return after
        raise ToolError(
            Code.INVALID_CURSOR,
            f"This cursor was not issued by {tool}. Call {tool} without a cursor.",
            next_tool=tool,
        )

    @staticmethod
    def _sign(key: bytes, body: str) -> bytes:
        return hmac.new(key, body.encode(), hashlib.sha256).digest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")
