"""Progress of a write that waits on a person or the backend, for clients that asked for it.

A client that sends ``_meta.progressToken`` with ``tools/call`` gets ``notifications/progress`` as the write
goes: asking the user, calling the backend, done. Best effort by design: a notification that cannot be sent
(the stream closed, a reader that does not read) is given up after ``SEND_SECONDS``, never failing or stalling
the write it describes. Without a token the SDK sends nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import anyio
from mcp.server.session import ServerSession

Reporter = Callable[[str], Awaitable[None]]
"""Called with a short message at each step of a write."""

SEND_SECONDS = 1.0

ASKING = "asking the user to confirm"
CALLING = "calling the backend"
DONE = "done"

log = logging.getLogger(__name__)


async def silent(message: str) -> None:
    """The reporter for a call nobody watches."""


class Progress:
    """Sends each step as the next numbered progress notification of one request."""

    def __init__(self, session: ServerSession) -> None:
        self.session = session
        self.step = 0

    async def __call__(self, message: str) -> None:
        self.step += 1
        try:
            with anyio.move_on_after(SEND_SECONDS):
                await self.session.report_progress(self.step, None, message)
        except Exception as exc:
            log.debug("progress notification not sent: %s", type(exc).__name__)
