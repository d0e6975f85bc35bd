"""How many 2025 sessions each caller holds: at most ``per_caller``, so that one caller cannot fill the table.

A place is taken when a request that would open a session arrives (before anything awaits, so concurrent
openings cannot overshoot), bound to the session's id once the SDK admits it, and given back when the session is
discarded (ended by the client, expired, crashed) or when the opening request made no session at all.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass


@dataclass(eq=False)
class Opening:
    """One request's place in its caller's quota, and the session it became (if it did)."""

    caller: str
    session_id: str | None = None


class SessionQuota:
    """Places per caller; every method is synchronous, so each is atomic on the event loop."""

    def __init__(self, per_caller: int) -> None:
        self._per_caller = per_caller
        self._held: Counter[str] = Counter()
        self._owners: dict[str, str] = {}

    def reserve(self, caller: str) -> Opening | None:
        """A place for a new session, or None when the caller holds all of its places."""
        if self._held[caller] >= self._per_caller:
            return None
        self._held[caller] += 1
        return Opening(caller)

    def admit(self, opening: Opening, session_id: str) -> None:
        """The place now belongs to this session."""
        opening.session_id = session_id
        self._owners[session_id] = opening.caller

    def settle(self, opening: Opening) -> None:
        """After the opening request: a place that never became a session is given back."""
        if opening.session_id is None:
            self._give_back(opening.caller)

    def discard(self, session_id: str) -> None:
        """The session is gone: its place is free again (once, however often it is discarded)."""
        caller = self._owners.pop(session_id, None)
        if caller is not None:
            self._give_back(caller)

    def held(self, caller: str) -> int:
        """Places the caller holds now."""
        return self._held[caller]

    def _give_back(self, caller: str) -> None:
        self._held[caller] -= 1
        if self._held[caller] <= 0:
            del self._held[caller]
