"""Request bodies are bounded before anything reads them, on every route but ``/mcp`` (which the SDK caps at
``[limits] max_body_bytes`` itself; what the gateway reads there first, ``read_capped`` reads within that cap and
``replayed`` gives back).

The approval page takes small forms (a CSRF token, a decision, a few ids) and its JSON API one small object, so a
body past PAGE_BODY_BYTES is refused with 413 as soon as its ``Content-Length`` says so, or as soon as that many
bytes of a chunked body have arrived: the rest is never read. ``multipart/form-data`` is refused (415) once its
first bytes are in, within the cap: no route takes a file, and Starlette would spool one to disk before any handler
could look at the cookie. What
passes is handed to the app whole, so no handler can read past the cap.
"""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

PAGE_BODY_BYTES = 64 * 1024
"""The largest body a route other than /mcp takes (a batch decision of every waiting approval fits many times)."""
UNCAPPED = ("/mcp",)


class BodyCap:
    """ASGI middleware: refuse an oversized or multipart body before the route reads it."""

    def __init__(self, app: ASGIApp, max_bytes: int = PAGE_BODY_BYTES) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in UNCAPPED:
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_bytes:
            await _refuse(413, f"A body here is at most {self.max_bytes} bytes.", scope, receive, send)
            return
        body, complete = await read_capped(receive, self.max_bytes)
        if not complete:
            if len(body) > self.max_bytes:
                await _refuse(413, f"A body here is at most {self.max_bytes} bytes.", scope, receive, send)
            return  # else the client went away
        # Read (within the cap) before refusing: closing on unread bytes would reset the connection under the answer.
        if headers.get("content-type", "").lower().startswith("multipart/"):
            await _refuse(415, "This route takes no multipart body.", scope, receive, send)
            return
        await self.app(scope, replayed(body, receive), send)


async def read_capped(receive: Receive, max_bytes: int) -> tuple[bytes, bool]:
    """A request's body, read up to ``max_bytes``: (what was read, whether that is all of it within the cap). Give
    it back with ``replayed(body, receive, complete=...)`` to whoever answers the request."""
    chunks = bytearray()
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return bytes(chunks), False
        chunks += message.get("body", b"")
        if len(chunks) > max_bytes:
            return bytes(chunks), False
        if not message.get("more_body", False):
            return bytes(chunks), True


def replayed(body: bytes, receive: Receive, *, complete: bool = True) -> Receive:
    """``receive`` with a body already read given back first, as one message (``complete``: all of it, else the
    rest follows from ``receive``), then whatever ``receive`` gives."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": not complete}
        return await receive()  # after the body: the rest of it, or the disconnect, when it comes

    return replay


async def _refuse(status: int, message: str, scope: Scope, receive: Receive, send: Send) -> None:
    body = {"error": message}  # the page API's own refusal shape
    headers = {"Cache-Control": "no-store", "Connection": "close"}
    await JSONResponse(body, status_code=status, headers=headers)(scope, receive, send)
