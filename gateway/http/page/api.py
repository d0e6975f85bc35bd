"""The approvers' JSON API, for ``mcp-safety-gateway approvals``: an approver token, no cookies, so no CSRF.

    GET  /approvals/api/open     the open approvals, as the page lists them
    POST /approvals/api/{id}     a decision ``{"decision": "approve"}`` or ``{"decision": "reject"}``

Every answer carries the page's headers (``no-store``: it lists who asked for what).
"""

from __future__ import annotations

from math import ceil
from typing import Any, Literal

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gateway.approvals.lifecycle import approval_facts, approval_url, approved_by, may_decide, state
from gateway.errors import Code
from gateway.http.page.decisions import HEADERS, TooManyAttempts, approver_by_token, record, source_of
from gateway.http.page.login import Approver
from gateway.http.page.views import rows
from gateway.records import Approval
from gateway.runtime import Gateway


class ApprovalApi:
    """The API's handlers over a running gateway."""

    def __init__(self, gw: Gateway) -> None:
        self.gw = gw

    def routes(self) -> list[Route]:
        """The API's routes (before the page's ``/approvals/{id}``, which would take them)."""
        return [
            Route("/approvals/api/open", self.open, methods=["GET"]),
            Route("/approvals/api/{approval_id}", self.decision, methods=["POST"]),
        ]

    async def open(self, request: Request) -> Response:
        approver = await self._bearer(request)
        if not isinstance(approver, Approver):
            return approver
        now = self.gw.clock()
        found = [row.approval for row in await rows(self.gw, approver.person, "all") if row.approval.expires_at > now]
        return api_answer({"approvals": [self._facts(approval, now, approver.person) for approval in found]})

    async def decision(self, request: Request) -> Response:
        approver = await self._bearer(request)
        if not isinstance(approver, Approver):
            return approver
        try:
            body = await request.json()
        except ValueError:
            body = None
        verdict = body.get("decision") if isinstance(body, dict) else None
        if verdict not in ("approve", "reject"):
            return api_answer({"error": 'send {"decision": "approve"} or {"decision": "reject"}'}, 400)
        answer: Literal["approve", "reject"] = "approve" if verdict == "approve" else "reject"
        approval, refused = await record(self.gw, request.path_params["approval_id"], approver, answer)
        if approval is None:
            return api_answer({"error": "no such approval"}, 404)
        now = self.gw.clock()
        found = await self.gw.store.get_approval(approval.approval_id) or approval
        return api_answer(
            {**self._facts(found, now, approver.person), "refused": refused.value if refused else None},
            409 if refused else 200,
        )

    def _facts(self, approval: Approval, now: float, person: str) -> dict[str, Any]:
        return {
            **approval_facts(approval, approval_url(self.gw.approvals_url or "", approval.approval_id)),
            "state": state(approval, now).value,
            "approvedBy": approved_by(approval),
            "yours": not may_decide(approval, person),
        }

    async def _bearer(self, request: Request) -> Approver | Response:
        """The approver holding the request's bearer token, or the answer refusing it (401, or 429 past the
        attempt limits)."""
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return unauthorized()
        try:
            approver = await approver_by_token(self.gw, source_of(request), token.strip())
        except TooManyAttempts as slow:
            return too_many(slow.retry_after)
        return approver if approver is not None else unauthorized()


def api_answer(body: dict[str, Any], status: int = 200) -> JSONResponse:
    """A JSON answer of the API, with the page's headers."""
    return JSONResponse(body, status_code=status, headers=HEADERS)


def too_many(retry_after: float) -> JSONResponse:
    """The answer past the approver-token attempt limits: 429, ``rate_limited``, when to try again."""
    seconds = ceil(retry_after)
    body = {
        "code": Code.RATE_LIMITED.value,
        "error": f"too many approver-token attempts from here or with this token; retry in {seconds} seconds",
        "details": {"retryAfterSeconds": seconds},
    }
    response = api_answer(body, 429)
    response.headers["Retry-After"] = str(seconds)
    return response


def unauthorized() -> JSONResponse:
    """The answer to a call without a valid approver token."""
    response = api_answer({"error": "send an approver token: Authorization: Bearer <token>"}, 401)
    response.headers["WWW-Authenticate"] = "Bearer"
    return response
