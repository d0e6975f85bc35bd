"""What became of an approved write, kept on its approval so that the page can say whether the write ran.

The write path records it (gateway/write/planned.py): the outcome of the call that carried the approved write
out (applied, unknown, backend_error, or the code of a refusal under the claim), and a refusal that met the
approved write before it got that far (the target changed since the preview, the plan expired, a rule now
denies it). A later call's outcome replaces an earlier one (a write refused while the backend was down, then
applied on the retry, reads applied); a replay and a call still in progress record nothing. Stored with the
approval's compare-and-set, so it never loses a decision landing at the same moment. A cancel before the claim
(``tasks/cancel``) ends the approval the same way (``cancelled``). A store that fails here is
logged and passed over: the caller's answer does not depend on it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from gateway.approvals.lifecycle import State, approval_id_for, cancel, state, with_result
from gateway.errors import Code, ToolError
from gateway.records import Approval
from gateway.stores.base import Approvals

ATTEMPTS = 8
BEFORE_THE_CLAIM = frozenset({Code.PLAN_STALE, Code.PLAN_EXPIRED, Code.DENIED, Code.TARGET_PROTECTED})
"""Refusals that can meet an approved write before its approval is read again (so before the claim)."""
NOT_AN_OUTCOME = frozenset({Code.REQUEST_IN_PROGRESS})
"""Answers that say nothing about what became of the write (another call is carrying it out)."""

log = logging.getLogger(__name__)


async def applied(store: Approvals, plan_id: str, answer: dict[str, Any], now: float) -> None:
    """The approved write ran (its first answer, not a replay): applied, with the version after it."""
    if not answer.get("replayed"):
        await _record(store, plan_id, "applied", None, answer.get("version"), now)


async def refused(store: Approvals, plan_id: str, refusal: ToolError, now: float, *, past_approval: bool) -> None:
    """The approved write was refused or failed: after its approval was read (``past_approval``), or before it in a
    way only an approved write can meet (BEFORE_THE_CLAIM)."""
    if refusal.code in NOT_AN_OUTCOME or (not past_approval and refusal.code not in BEFORE_THE_CLAIM):
        return
    outcome = {Code.OUTCOME_UNKNOWN: "unknown", Code.BACKEND_ERROR: "backend_error"}.get(refusal.code, "refused")
    await _record(store, plan_id, outcome, refusal.wire_code, None, now)


async def cancelled(store: Approvals, approval_id: str, now: float) -> None:
    """The caller cancelled the write before it was claimed: its approval ends (``cancelled``), so the page says so
    and takes no late decision."""
    await _changed(store, approval_id, lambda current: cancel(current, now), f"the cancel of approval {approval_id}")


async def _record(store: Approvals, plan_id: str, outcome: str, code: str | None, version: Any, now: float) -> None:
    def recorded(current: Approval) -> Approval:
        if state(current, now) is not State.APPROVED:
            return current  # not approved (or no longer): nothing to say on the page
        return with_result(current, outcome, code, version, now)

    await _changed(store, approval_id_for(plan_id), recorded, f"the result of approved write {plan_id}")


async def _changed(store: Approvals, approval_id: str, change: Callable[[Approval], Approval], what: str) -> None:
    """Store ``change`` of the approval with the approval's compare-and-set, read again while other changes land
    first; a change that changes nothing stores nothing. A failing store is logged: no answer depends on it."""
    try:
        for _ in range(ATTEMPTS):
            current = await store.get_approval(approval_id)
            if current is None:
                return  # not a url-mode write
            changed = change(current)
            if changed is current or await store.replace_approval(changed):
                return
        log.warning("%s was not recorded: its approval kept changing", what)
    except Exception as exc:  # the caller's answer stands whatever happens here
        log.warning("%s was not recorded (%s)", what, type(exc).__name__)
