"""Crash points for reliability tests: ``GATEWAY_CRASH_AT=POINT`` makes the process die on the spot (no cleanup,
like SIGKILL) the first time a write reaches that point. The write path's points, in order (``POINTS``, on every
store): ``before-claim``, ``after-claim``, ``after-backend-write`` and ``before-settle`` (the outcome is decided;
its audit entry and the key's settlement are not yet stored). The stores whose settle is one transaction (SQLite,
PostgreSQL) have one more, ``mid-settle``: inside that transaction, after the audit entry was inserted and before
the commit (so the crash must lose both). ``ALL_POINTS`` is every point, what the crash tests of those stores run
through; Redis, whose settle stores the entry and then the outcome in two steps, never reaches ``mid-settle``.

Unset, this does nothing. It exists so that tests can prove, from outside the process, that a crash at
each step of the write path never leads to a second write.
"""

from __future__ import annotations

import logging
import os

ENV_VAR = "GATEWAY_CRASH_AT"
POINTS = ("before-claim", "after-claim", "after-backend-write", "before-settle")
ALL_POINTS = (*POINTS, "mid-settle")
log = logging.getLogger(__name__)


def crash_point(name: str) -> None:
    """Die here if the environment asks for it."""
    if os.environ.get(ENV_VAR) == name:
        log.critical("%s=%s: exiting without cleanup", ENV_VAR, name)
        os._exit(137)
