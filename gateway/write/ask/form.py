"""Asking the user before a write, in both protocol eras.

2025-11-25: the gateway pushes ``elicitation/create`` mid-call and waits (bounded by the prompt timeout).
2026-07-28: the gateway answers ``InputRequiredResult`` with a sealed ``requestState``; the client retries
with ``inputResponses``. The SDK boundary verifies the seal, expiry and request binding before the handler
runs. Here the inner state must also name this caller, plan and key, and its nonce must be unused: an answer
without such a state is ignored and the user is asked again.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from typing import Any

import anyio
import mcp_types as types
from mcp.server import ServerRequestContext
from mcp.shared.exceptions import NoBackChannelError

from gateway.errors import AVAILABLE, Code, ToolError, authorization_denial, confirmation_hint
from gateway.observability.tracing import span
from gateway.protocol import stateless
from gateway.stores import Store

ANSWER_KEY = "confirm"


@dataclass(frozen=True)
class Question:
    """What to ask, of whom, about which plan and key."""

    message: str
    schema: dict[str, Any]
    caller: str
    plan_id: str
    key: str
    timeout: float


async def ask(
    ctx: ServerRequestContext[Any, Any],
    params: types.CallToolRequestParams,
    question: Question,
    store: Store,
    now: float,
) -> types.ElicitResult | types.InputRequiredResult | None:
    """The user's answer, None when none came in time, or (2026) a request to ask and call again."""
    if stateless(ctx.protocol_version):
        return await _answer_from_retry(params, question, store, now) or _input_required(question)
    try:
        with anyio.fail_after(question.timeout), span("confirm wait"):
            return await ctx.session.elicit_form(question.message, question.schema, related_request_id=ctx.request_id)
    except TimeoutError:
        return None
    except NoBackChannelError:
        raise ToolError(
            Code.CONFIRMATION_UNAVAILABLE,
            "This connection cannot carry a confirmation prompt (no back-channel). Nothing was changed.",
            details={"needs": "back-channel"},
            authorization=authorization_denial(AVAILABLE, [confirmation_hint(["form"])]),
        ) from None


async def _answer_from_retry(
    params: types.CallToolRequestParams, question: Question, store: Store, now: float
) -> types.ElicitResult | None:
    answer = (params.input_responses or {}).get(ANSWER_KEY)
    if not isinstance(answer, types.ElicitResult) or not params.request_state:
        return None
    try:
        state = json.loads(params.request_state)
    except ValueError:
        return None
    expected = {"caller": question.caller, "planId": question.plan_id, "idempotencyKey": question.key}
    if not isinstance(state, dict) or any(state.get(name) != value for name, value in expected.items()):
        return None
    nonce = state.get("nonce")
    if not isinstance(nonce, str) or not await store.use_nonce(nonce, now, question.timeout):
        return None
    return answer


def _input_required(question: Question) -> types.InputRequiredResult:
    state = {
        "caller": question.caller,
        "planId": question.plan_id,
        "idempotencyKey": question.key,
        "nonce": secrets.token_urlsafe(16),
    }
    form = types.ElicitRequestFormParams(message=question.message, requested_schema=question.schema)
    return types.InputRequiredResult(
        input_requests={ANSWER_KEY: types.ElicitRequest(params=form)}, request_state=json.dumps(state)
    )
