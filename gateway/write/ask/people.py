"""Step 7 of a url-mode write: people approve it on the gateway's page; the client only carries the link.

    approval     made on first ask, bound to the plan (gateway/approvals/lifecycle.py), kept in the store
    approved     the write goes on (step 8); with passkeys required, only on enough yeses signed over its facts
                 by enrolled, unrevoked passkeys of the people who gave them (else not_confirmed)
    rejected     not_confirmed, and every later call with this plan too (Reject ends the plan)
    pending      a client that declared url elicitation is sent the link and the call waits:
                   2025-11-25  elicitation/create (mode url) pushed; the call waits for the decision up to the
                               prompt timeout, then notifications/elicitation/complete
                   2026-07-28  InputRequiredResult carrying the url elicitation; each retry waits a while for
                               the decision and, still pending, answers InputRequiredResult with state only
                               (the client retries at once); the whole wait is bounded by the prompt timeout
                 any other client (form only, or no elicitation at all) gets approval_pending with the link;
                 a retry with the same key goes on once the approval is given
    declined     the client would not open the link: not_confirmed, and nothing is used up (the write still
                 waits on the page; a retry with the same key is sent the link again). Only a Reject on the page
                 ends the plan.

A pushed link (2025-11-25) carries ``_meta["mcp-safety-gateway/approval"]``: ``expiresAt`` (the approval's end) and
``waitsUntil`` (when this call stops waiting and answers approval_pending), so a client can show how long the wait
has left (the terminal client does).

Nothing the client answers counts as a yes: the decision is read from the store, where only the page writes it.
The 2026 ``requestState`` carries when the first ask happened, so the wait stays bounded across retries; it is
sealed by the SDK boundary and bound to this caller, plan and key, and replaying it can only make the gateway
look at the store again.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import anyio
import mcp_types as types
from mcp.server import ServerRequestContext
from mcp.shared.exceptions import NoBackChannelError
from mcp.shared.message import ServerMessageMetadata

from gateway.approvals.digest import digest_of, short
from gateway.approvals.lifecycle import (
    WAIT_META,
    State,
    approval_id_for,
    approval_url,
    approved_by,
    binds,
    new_approval,
    state,
)
from gateway.approvals.passkeys import signed_with, unsigned
from gateway.approvals.policy import Choice
from gateway.audit import entries, trail
from gateway.errors import AVAILABLE, UNAVAILABLE, Code, ToolError, approval_hints, authorization_denial
from gateway.identity.caller import current_display, current_person
from gateway.protocol import stateless
from gateway.records import Approval, Plan
from gateway.stores import Store
from gateway.text import rfc3339
from gateway.write.parts import Parts

ANSWER_KEY = "approve"
POLL_SECONDS = 0.5
"""How often a waiting call looks at the store for the decision."""
RETRY_ROUNDS = 8
"""A 2026 wait is split in this many holds (the SDK client gives up after 10 InputRequiredResult rounds)."""


@dataclass(frozen=True)
class ApprovalAsk:
    """What people are asked to approve, and how: the plan, who asks, the question, where the page is."""

    plan: Plan
    caller_person: str | None
    key: str
    message: str
    page_url: str | None
    approvers: int
    four_eyes: bool
    timeout: float
    rule: str | None = None
    max_pending: int = 20
    """How many approvals the caller may have waiting at once ([approvals] max_pending_per_caller)."""
    announce: Callable[[Approval, str], None] | None = None
    """Told about a new approval and its link (the rule's webhook), without waiting."""
    caller_display: str | None = None
    target_name: str | None = None
    """Shown on the page beside the requester and the target (gateway.records.Approval)."""
    digest: str | None = None
    """The digest of the facts people approve, as this call computes them (gateway.approvals.digest)."""
    facts: dict[str, Any] | None = None
    """Those facts themselves, kept on the approval (its proposed event carries them)."""


def ask_for(
    gw: Parts,
    plan: Plan,
    key: str,
    message: str,
    choice: Choice,
    timeout: float,
    target_name: str | None,
    facts: dict[str, Any] | None = None,
) -> ApprovalAsk:
    """What a url-mode write asks the approval page for: the plan, the caller as a person (and the name shown for
    them), the target's name as the backend reported it, the rule's approvers, four eyes and webhook."""
    notifier, webhook = gw.notifier, choice.notify
    announce = None
    if notifier is not None and webhook is not None:
        announce = lambda approval, url: notifier.notify(webhook, approval, url, choice.rule)  # noqa: E731
    return ApprovalAsk(
        plan=plan,
        caller_person=current_person(),
        caller_display=current_display(),
        target_name=target_name,
        key=key,
        message=message,
        page_url=gw.approvals_url,
        approvers=choice.approvers,
        four_eyes=choice.four_eyes,
        rule=choice.rule,
        max_pending=gw.config.approvals.max_pending_per_caller,
        announce=announce,
        timeout=timeout,
        digest=digest_of(facts) if facts is not None else None,
        facts=facts,
    )


async def approve(
    ctx: ServerRequestContext[Any, Any],
    params: types.CallToolRequestParams,
    request: ApprovalAsk,
    gw: Parts,
) -> Approval | types.InputRequiredResult:
    """The given approval, or (2026) a request to ask and call again; raises ToolError otherwise. With passkeys
    required, an approval counts only with enough signed yeses, checked here against the passkeys as the store
    has them now (gateway.approvals.passkeys). The waits take the gateway's clock and sleep."""
    decided = await _decided(ctx, params, request, gw)
    if isinstance(decided, Approval) and gw.config.passkey_required(request.plan.tool):
        await _require_signatures(decided, request, gw)
    return decided


async def _require_signatures(approval: Approval, request: ApprovalAsk, gw: Parts) -> None:
    """Refuse (not_confirmed, nothing sent) an approval without ``approvers_needed`` yeses signed over this
    write's facts by enrolled, unrevoked passkeys of the people who gave them."""
    problems = unsigned(approval, request.digest, request.page_url or "", await signed_with(approval, gw.store))
    signed = len(approved_by(approval)) - len(problems)
    if signed >= approval.approvers_needed and not problems:
        return
    raise ToolError(
        Code.NOT_CONFIRMED,
        f"This write needs {approval.approvers_needed} approval(s) signed with an approver's passkey over its exact"
        f" facts, and the approval on record has {max(signed, 0)}: {'; '.join(problems) or 'none signed'}."
        " Nothing was changed; preview again, and have the approvers decide on the page with their passkeys.",
        details={"approvalId": approval.approval_id, "unsigned": problems},
        authorization=authorization_denial(UNAVAILABLE, context=approval.approval_id),
    )


async def _decided(
    ctx: ServerRequestContext[Any, Any],
    params: types.CallToolRequestParams,
    request: ApprovalAsk,
    gw: Parts,
) -> Approval | types.InputRequiredResult:
    approval = await approval_for(request, gw)
    current = state(approval, gw.clock())
    if current is State.PENDING:
        if not _can_open_urls(ctx):
            raise _pending(approval, request)
        if stateless(ctx.protocol_version):
            return await _stateless_round(params, request, approval, gw)
        current = await _pushed(ctx, request, approval, gw)
        approval = await gw.store.get_approval(approval.approval_id) or approval
    return _verdict(approval, current, request)


async def approval_for(request: ApprovalAsk, gw: Parts) -> Approval:
    """The plan's approval: made and announced on first ask (within the caller's cap of waiting ones), else the
    stored one, which must be bound to this plan's facts."""
    plan, store, now = request.plan, gw.store, gw.clock()
    found = await store.get_approval(approval_id_for(plan.plan_id))
    if found is None:
        await _require_room(request, store, now)
        made = new_approval(
            plan,
            request.caller_person,
            request.message,
            now,
            needed=request.approvers,
            four_eyes=request.four_eyes,
            rule=request.rule,
            caller_display=request.caller_display,
            target_name=request.target_name,
            digest=request.digest,
            facts=request.facts,
        )
        found = await store.put_approval(made)
        if found == made:
            await trail.append(store, entries.proposed(found, now))
            if request.announce is not None and request.page_url is not None:
                request.announce(found, approval_url(request.page_url, found.approval_id))
    if not binds(found, plan):
        raise ToolError(Code.NOT_CONFIRMED, "The approval on record is for other facts. Nothing was changed.")
    return found


async def _require_room(request: ApprovalAsk, store: Store, now: float) -> None:
    """Refuse a new approval past the caller's cap of waiting ones, so one agent cannot bury the page (a check
    before the write, not a lock: replicas racing may pass it by one or two each)."""
    caller = request.plan.caller
    waiting = [each for each in await store.open_approvals(now) if each.caller == caller]
    if sum(state(each, now) is State.PENDING for each in waiting) >= request.max_pending:
        raise ToolError(
            Code.TOO_MANY_APPROVALS,
            f"This caller already has {request.max_pending} writes waiting for approval. Nothing was changed;"
            " retry once people have decided some of them.",
        )


ENDED = {
    State.REJECTED: "The write was rejected on the approval page. Nothing was changed; this plan cannot be used again.",
    State.CANCELLED: "The write was cancelled (tasks/cancel) before it ran. Nothing was changed; this plan is used up.",
    State.EXPIRED: "The approval expired before anyone approved. Nothing was changed.",
}
"""What an approval that ended without a write says to a call that comes back for it (not_confirmed)."""


def _verdict(approval: Approval, current: State, request: ApprovalAsk) -> Approval:
    if current is State.APPROVED:
        if approval.digest is None or approval.digest != request.digest:
            raise _facts_moved(approval, request)
        return approval
    if current in ENDED:
        raise ToolError(
            Code.NOT_CONFIRMED,
            ENDED[current],
            details=_ended(approval, current),
            authorization=authorization_denial(UNAVAILABLE, context=approval.approval_id),
        )
    raise _pending(approval, request)


def _facts_moved(approval: Approval, request: ApprovalAsk) -> ToolError:
    """What people approved no longer hashes to this write's facts (its question, its rule or the rule's definition
    changed since, or the approval on record is not what the page stored): nothing runs."""
    approved = "none" if approval.digest is None else short(approval.digest)
    now = "none" if request.digest is None else short(request.digest)
    return ToolError(
        Code.PLAN_STALE,
        f"The facts people approved (digest {approved}) are not this write's facts now (digest {now}): the question"
        " or the rule that asked for approval changed since. Nothing was changed; preview again and ask again.",
        details={"approvalId": approval.approval_id, "approvedDigest": approval.digest, "digest": request.digest},
    )


def _ended(approval: Approval, current: State) -> dict[str, Any]:
    return {"approvalId": approval.approval_id, "state": current.value}


def _pending(approval: Approval, request: ApprovalAsk) -> ToolError:
    if request.page_url is None:
        return ToolError(
            Code.CONFIRMATION_UNAVAILABLE,
            "This write needs approval on the gateway's page, and no page address is configured "
            "(approvals.public_url). Nothing was changed.",
            authorization=authorization_denial(UNAVAILABLE),
        )
    url = approval_url(request.page_url, approval.approval_id)
    return ToolError(
        Code.APPROVAL_PENDING,
        f"This write waits for approval by a person at {url} (until {rfc3339(approval.expires_at)}). "
        "Show the link to the user; once approved, retry this call with the same idempotencyKey.",
        details=_waiting(approval, url),
        authorization=_awaited(approval, url),
    )


def _waiting(approval: Approval, url: str) -> dict[str, Any]:
    """The details of a write that waits on the page: where, until when, and who must still approve it."""
    return {
        "url": url,
        "approvalId": approval.approval_id,
        "expiresAt": rfc3339(approval.expires_at),
        "approversNeeded": approval.approvers_needed,
        "approvedSoFar": len(approved_by(approval)),
        "fourEyes": approval.four_eyes,
    }


def _awaited(approval: Approval, url: str) -> dict[str, Any]:
    """The structured denial of a write that waits on the page: the approval there lets it through."""
    hints = approval_hints(
        url,
        approval.approval_id,
        rfc3339(approval.expires_at),
        approval.approvers_needed,
        len(approved_by(approval)),
        approval.four_eyes,
    )
    return authorization_denial(AVAILABLE, hints, context=approval.approval_id)


def _declined(approval: Approval, request: ApprovalAsk, action: str) -> ToolError:
    """The client would not open the link: nothing is used up, the write still waits on the page."""
    url = approval_url(request.page_url or "", approval.approval_id)
    return ToolError(
        Code.NOT_CONFIRMED,
        f"The user did not open the approval page ({action}). Nothing was changed, and the write still waits for"
        f" approval at {url} until {rfc3339(approval.expires_at)}: retry this call with the same idempotencyKey"
        " to be sent the link again.",
        details=_waiting(approval, url),
        authorization=_awaited(approval, url),
    )


def _link(
    request: ApprovalAsk, approval: Approval, *, waits_until: float | None = None
) -> types.ElicitRequestURLParams:
    """The url elicitation for an approval: the question, the page's link, and (pushed, 2025-11-25) how long this
    call waits. The 2026-07-28 wire has no ``_meta`` on an embedded request: the SDK drops it, so none is sent."""
    wait = {"approvalId": approval.approval_id, "expiresAt": rfc3339(approval.expires_at)}
    if approval.digest is not None:
        wait["digest"] = short(approval.digest)
    return types.ElicitRequestURLParams(
        message=request.message,
        url=approval_url(request.page_url or "", approval.approval_id),
        elicitation_id=approval.approval_id,
        _meta=None if waits_until is None else {WAIT_META: {**wait, "waitsUntil": rfc3339(waits_until)}},
    )


def _can_open_urls(ctx: ServerRequestContext[Any, Any]) -> bool:
    capabilities = ctx.session.client_capabilities
    elicitation = capabilities.elicitation if capabilities is not None else None
    return elicitation is not None and elicitation.url is not None


async def held(gw: Parts, approval: Approval, until: float) -> Approval:
    """The approval marked as waited on by a call of its caller until ``until`` (at most its expiry), so that the
    page says the write runs as soon as it is approved. Best effort: a decision stored meanwhile wins (the mark is
    not made), and the mark decides nothing."""
    until = min(until, approval.expires_at)
    if approval.waits_until is not None and approval.waits_until >= until:
        return approval
    marked = replace(approval, waits_until=until)
    if await gw.store.replace_approval(marked):
        return replace(marked, rev=approval.rev + 1)
    return await gw.store.get_approval(approval.approval_id) or approval


async def _pushed(ctx: ServerRequestContext[Any, Any], request: ApprovalAsk, approval: Approval, gw: Parts) -> State:
    """2025-11-25: push the link, then wait for the decision; tell the client when it came."""
    approval = await held(gw, approval, gw.clock() + request.timeout)
    link = _link(request, approval, waits_until=min(gw.clock() + request.timeout, approval.expires_at))
    try:
        with anyio.fail_after(request.timeout):
            answer = await ctx.session.send_request(
                types.ElicitRequest(params=link),
                types.ElicitResult,
                metadata=ServerMessageMetadata(related_request_id=ctx.request_id),
            )
    except TimeoutError:
        raise _pending(approval, request) from None
    except NoBackChannelError:
        raise _pending(approval, request) from None
    if answer.action != "accept":
        raise _declined(approval, request, answer.action)
    current = await _wait(gw, approval, until=gw.clock() + request.timeout)
    if current is not State.PENDING:
        await ctx.session.send_elicit_complete(approval.approval_id, related_request_id=ctx.request_id)
    return current


async def _stateless_round(
    params: types.CallToolRequestParams, request: ApprovalAsk, approval: Approval, gw: Parts
) -> Approval | types.InputRequiredResult:
    """2026-07-28: ask with the link; on each retry wait a while; still pending, ask the client to call again."""
    asked_at = _asked_at(params, request)
    if asked_at is None:
        approval = await held(gw, approval, gw.clock() + request.timeout)
        return _input_required(request, approval, gw.clock(), with_link=True)
    answer = (params.input_responses or {}).get(ANSWER_KEY)
    if isinstance(answer, types.ElicitResult) and answer.action != "accept":
        raise _declined(approval, request, answer.action)
    deadline = asked_at + request.timeout
    if gw.clock() >= deadline:
        raise _pending(approval, request)
    hold = request.timeout / RETRY_ROUNDS
    current = await _wait(gw, approval, until=min(deadline, gw.clock() + hold))
    if current is State.PENDING:
        return _input_required(request, approval, asked_at, with_link=False)
    return _verdict(await gw.store.get_approval(approval.approval_id) or approval, current, request)


async def _wait(gw: Parts, approval: Approval, *, until: float) -> State:
    """Look at the store until the approval is decided or ``until`` passes (on the gateway's clock, pausing with
    its sleep); the state last seen."""
    while True:
        found = await gw.store.get_approval(approval.approval_id) or approval
        current = state(found, gw.clock())
        if current is not State.PENDING or gw.clock() >= until:
            return current
        await gw.sleep(min(POLL_SECONDS, max(0.0, until - gw.clock())))


def _state(request: ApprovalAsk, asked_at: float) -> str:
    plan = request.plan
    return json.dumps(
        {"caller": plan.caller, "planId": plan.plan_id, "idempotencyKey": request.key, "askedAt": asked_at}
    )


def _asked_at(params: types.CallToolRequestParams, request: ApprovalAsk) -> float | None:
    """When this call first asked, from a request state bound to this caller, plan and key (else None)."""
    if not params.request_state:
        return None
    try:
        found = json.loads(params.request_state)
    except ValueError:
        return None
    plan = request.plan
    expected = {"caller": plan.caller, "planId": plan.plan_id, "idempotencyKey": request.key}
    if not isinstance(found, dict) or any(found.get(name) != value for name, value in expected.items()):
        return None
    asked_at = found.get("askedAt")
    return float(asked_at) if isinstance(asked_at, int | float) and not isinstance(asked_at, bool) else None


def _input_required(
    request: ApprovalAsk, approval: Approval, asked_at: float, *, with_link: bool
) -> types.InputRequiredResult:
    if not with_link:
        return types.InputRequiredResult(request_state=_state(request, asked_at))
    link = _link(request, approval)
    return types.InputRequiredResult(
        input_requests={ANSWER_KEY: types.ElicitRequest(params=link)}, request_state=_state(request, asked_at)
    )
