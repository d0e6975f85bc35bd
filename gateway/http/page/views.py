"""What the approval page shows of an approval, in the gateway's own words: where the write stands, the requester
as a person, the target by its reported name, times that a small script also shows in the viewer's own zone.

    FILTERS   the list's views: waiting (the default), approved (for the agent's retry), applied, not applied,
              rejected, cancelled, expired, all; newest first, each as the store keeps approvals (an hour past expiry)
    Row       one approval as a row of the list or of a Reject confirmation
    headline  the detail page's title and the sentence under it, by where the write stands
    ToolFacts the tool's title and what its write does, in words, from its published annotations and risk
    filters   the Jinja filters the templates use; every value from outside escaped (gateway/text.py)
    REFUSALS  what the page says when a decision is not taken, by reason

Nothing here decides anything: the states come from gateway.approvals.lifecycle.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from markupsafe import Markup, escape

from gateway.approvals.digest import short
from gateway.approvals.lifecycle import Refused, Shown, State, may_decide, shown, state
from gateway.catalog.risk import RISK_META
from gateway.identity.person import audited, readable_person
from gateway.identity.principal import decode, readable
from gateway.records import TOMBSTONE_SECONDS, Approval
from gateway.runtime import Gateway
from gateway.text import escaped, printable, quoted, rfc3339

REFUSALS = {
    Refused.EXPIRED: "This approval has expired; nothing was recorded.",
    Refused.SETTLED: "This write was already decided; your answer was not recorded.",
    Refused.CANCELLED: "The agent cancelled this write, so nothing was written; your answer was not recorded.",
    Refused.OWN_WRITE: "You asked for this write, so you cannot approve or reject it (four eyes).",
    Refused.CHANGED_MIND: "You already answered this write; an answer cannot be changed.",
    Refused.NOT_AN_APPROVER: "You are signed in, but not as one of this gateway's approvers; nothing was recorded.",
    Refused.UNSIGNED: "This write needs your passkey's signature, and none that holds came with your answer; nothing"
    " was recorded. Decide on this write's own page, with a passkey registered at /approvals/passkeys.",
}
VERDICTS = ("approve", "reject")
TOO_MANY = "Too many approver-token attempts from here or with that token; try again in {seconds} seconds."

FILTERS: dict[str, tuple[str, frozenset[Shown]]] = {
    "waiting": ("Waiting", frozenset({Shown.WAITING})),
    "approved": ("Approved, not yet run", frozenset({Shown.APPROVED, Shown.RUNNING})),
    "applied": ("Applied", frozenset({Shown.APPLIED})),
    "not_applied": ("Approved, not applied", frozenset({Shown.NOT_APPLIED})),
    "rejected": ("Rejected", frozenset({Shown.REJECTED})),
    "cancelled": ("Cancelled", frozenset({Shown.CANCELLED})),
    "expired": ("Expired", frozenset({Shown.EXPIRED})),
    "all": ("All", frozenset(Shown)),
}
"""The list's filters: the query's ``show``, its label, and which states it shows."""
LABELS = {
    Shown.WAITING: "waiting",
    Shown.APPROVED: "approved: waiting for the agent's retry",
    Shown.RUNNING: "approved: running now",
    Shown.APPLIED: "applied",
    Shown.NOT_APPLIED: "approved, not applied",
    Shown.REJECTED: "rejected",
    Shown.CANCELLED: "cancelled by the agent",
    Shown.EXPIRED: "expired",
}


@dataclass(frozen=True)
class Row:
    """One approval as a person sees it in a list."""

    approval: Approval
    shown: Shown
    own: bool

    @property
    def state(self) -> str:
        """The state's name, as the CSS class and the filters spell it."""
        return self.shown.value

    @property
    def selectable(self) -> bool:
        """Whether the list offers a box to decide it: waiting, and not this person's own write."""
        return self.shown is Shown.WAITING and not self.own


async def rows(gw: Gateway, person: str, show: str) -> list[Row]:
    """The approvals a filter shows, newest first, with where each stands and whether it is this person's own."""
    now = gw.clock()
    states = FILTERS.get(show, FILTERS["waiting"])[1]
    kept = await gw.store.open_approvals(now - TOMBSTONE_SECONDS)  # what the store keeps: an hour past expiry
    found = [Row(a, shown(a, now), not may_decide(a, person)) for a in kept]
    return [row for row in found if row.shown in states]


def headline(approval: Approval, now: float) -> tuple[str, str]:
    """The detail page's title and the sentence under it: where the write stands, in words."""
    where = shown(approval, now)
    result = approval.result or {}
    if where is Shown.WAITING:
        return "Approve this write?", ""
    if where is Shown.RUNNING:
        return "Approved: running now", (
            "The agent's call was waiting for this approval and runs the write now. This page looks again every "
            "few seconds."
        )
    if where is Shown.APPROVED:
        return "Approved: waiting for the agent to call again", (
            "No call of the agent is waiting for it now: the write runs when the agent retries with the same key, "
            f"until {rfc3339(approval.expires_at)}. This page looks again every few seconds."
        )
    if where is Shown.APPLIED:
        version = f", version {result['version']} after it" if result.get("version") is not None else ""
        return "Approved and applied", f"The write ran at {rfc3339(result.get('at', now))}{version}."
    if where is Shown.NOT_APPLIED:
        return "Approved, but not applied", _not_applied(result)
    if where is Shown.REJECTED:
        return "Rejected", "Nothing was written, and this plan cannot be used again."
    if where is Shown.CANCELLED:
        return (
            "Cancelled: nothing was written",
            "The agent cancelled this write before it ran; it takes no decision now.",
        )
    if state(approval, now) is State.APPROVED:
        return "Expired: nothing was written", "It was approved, and the agent did not use it before the plan expired."
    return "Expired: nothing was written", "Nobody decided before it expired."


@dataclass(frozen=True)
class ToolFacts:
    """What the page says of the tool a write calls: its title, and what the write does in words."""

    title: str | None
    sentence: str


def tool_facts(gw: Gateway, name: str) -> ToolFacts:
    """The tool's title and a sentence from its published annotations and risk (gateway.catalog.risk): whether
    the write is destructive, whether it can be undone, whether it reaches beyond its backend."""
    published = gw.live.published().get(name)
    if published is None:
        return ToolFacts(None, "Its backend is not answering right now; the write cannot run until it is back.")
    tool = published.tool
    hints, risk = tool.annotations, dict((tool.meta or {}).get(RISK_META) or {})
    title = tool.title or (hints.title if hints is not None else None)
    if hints is not None and hints.destructive_hint:
        undo = "it cannot be undone" if risk.get("reversibility") == "none" else "only a person can undo it"
        sentence = f"This write is destructive: it deletes or replaces what the target holds, and {undo}."
    else:
        sentence = "This write changes the target without deleting what it holds."
    if hints is not None and hints.open_world_hint:
        sentence += " It also reaches systems beyond the gateway's backend."
    if risk.get("riskLevel"):
        sentence += f" Risk: {risk['riskLevel']}."
    return ToolFacts(title, sentence)


def _not_applied(result: dict[str, Any]) -> str:
    code = str(result.get("code") or result.get("outcome"))
    if result.get("outcome") == "unknown":
        return "The write was sent and no answer came back: it may have run (outcome_unknown). Check the target."
    if result.get("outcome") == "backend_error":
        return "The backend refused the write (backend_error). Nothing was changed by the gateway."
    return f"The gateway refused the write ({code}); nothing was written. The agent must preview again."


def requester(approval: Approval) -> str:
    """Who asked, as a person: their (issuer, subject) with their display beside it, and the client they used;
    the caller as the audit names it where no person is known (no [auth])."""
    principal = decode(approval.caller)
    if approval.caller_person is None or principal is None:
        return escaped(readable(approval.caller))
    person = readable_person(audited(approval.caller_person, approval.caller_display))
    return escaped(f"{person} using {principal.client}")


def time_tag(timestamp: float) -> Markup:
    """A time in UTC, marked up so that the page's script can add it in the viewer's own zone."""
    text = rfc3339(timestamp)
    return Markup('<time datetime="{0}">{0}</time>').format(escape(text))


def label(where: Shown) -> str:
    """A state in words."""
    return LABELS[where]


def filters() -> dict[str, Any]:
    """The filters the templates use beside the text ones (gateway.text); ``printable`` shows a whole text (a
    statement a person approves), every hidden character spelled out, nothing cut."""
    return {
        "requester": requester,
        "time": time_tag,
        "label": label,
        "quoted": quoted,
        "printable": printable,
        "short_digest": short,
    }
