"""Tool-level refusals: one enumeration of stable codes, one table of what each means and what to do next.

Every refusal the gateway makes is a ``ToolError``. On the wire (gateway.mcp.server) it becomes an ``isError``
result whose first text block is JSON ``{"code", "message", "nextTool"?, "details"?}`` and which carries no
``structuredContent``. Tests match ``code``; the message is for the model. The README's troubleshooting table
is ``markdown_table()``, and a test keeps the two equal. A few codes are refusals of the HTTP transport itself
(gateway/http): they travel in a JSON body beside an HTTP status instead, with the same meaning.

Two codes speak of the target a preview plans a change to, and are spelled with the target's configured noun
(``target.noun``): ``Code.TARGET_NOT_FOUND`` goes on the wire as ``tenant_not_found`` in the default config and
as ``database_not_found`` in a gateway whose noun is "database". A ``ToolError`` carries the noun with the code;
``wire_code`` is the spelling a client (and the audit) sees.

A refusal whose way out is an authorization (a person's confirmation or approval, a scope, or none that can be had:
a rule's deny) also carries a structured denial in the shape of SEP-2643 (draft): ``authorization`` is the
envelope ``{reason, remediation, authorizationContextId?, credentialDisposition?, remediationHints?}``, sent in the
isError result's ``_meta`` under ``AUTHORIZATION_META`` beside the unchanged code and message (gateway.mcp.calls).
Its hints say what would let the call through, in the draft's hint types (``url``, ``task``,
``oauth_authorization_details`` with RFC 9396 ``authorization_details``) and one of the gateway's own
(``APPROVAL_HINT``: how many people must approve, and whether the caller may be one of them;
``CONFIRMATION_HINT``: a client that can show a form); clients ignore hint types they do not know. The details of
such a refusal name the same facts for a reader of the text.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gateway.records import AuditEntry


class Code(StrEnum):
    """The codes a caller (and a test) can match."""

    INVALID_ARGUMENTS = "invalid_arguments"
    REQUEST_TOO_LARGE = "request_too_large"
    INVALID_CURSOR = "invalid_cursor"
    FORBIDDEN = "forbidden"
    CALLER_REVOKED = "caller_revoked"
    DENIED = "denied"
    STATEMENT_REFUSED = "statement_refused"
    RATE_LIMITED = "rate_limited"
    TARGET_NOT_FOUND = "{noun}_not_found"
    TARGET_PROTECTED = "{noun}_protected"
    PLAN_NOT_FOUND = "plan_not_found"
    PLAN_EXPIRED = "plan_expired"
    PLAN_STALE = "plan_stale"
    CONFIRMATION_UNAVAILABLE = "confirmation_unavailable"
    NOT_CONFIRMED = "not_confirmed"
    APPROVAL_PENDING = "approval_pending"
    IDEMPOTENCY_KEY_REUSED = "idempotency_key_reused"
    REQUEST_IN_PROGRESS = "request_in_progress"
    OUTCOME_UNKNOWN = "outcome_unknown"
    BACKEND_UNAVAILABLE = "backend_unavailable"
    STORE_UNAVAILABLE = "store_unavailable"
    BACKEND_ERROR = "backend_error"
    INTERNAL_ERROR = "internal_error"
    TOO_MANY_SESSIONS = "too_many_sessions"
    TOO_MANY_APPROVALS = "too_many_approvals"
    TOO_MANY_TASKS = "too_many_tasks"
    PROXIED_REQUEST_REFUSED = "proxied_request_refused"

    @property
    def per_noun(self) -> bool:
        """Whether the code is spelled with the target's noun."""
        return NOUN in self.value

    def spelled(self, noun: str | None = None) -> str:
        """The code as a client sees it: a target code takes the target's noun (``tenant_not_found``)."""
        if not self.per_noun:
            return self.value
        if noun is None:
            raise ValueError(f"{self.name} is spelled with the target's noun; none was given")
        return self.value.replace(NOUN, noun)

    @classmethod
    def parse(cls, wire: str) -> tuple[Code, str | None]:
        """A code as a client saw it, back to the code and its noun (ValueError for no code of ours)."""
        try:
            return cls(wire), None
        except ValueError:
            pass
        for code in cls:
            suffix = code.value.partition(NOUN)[2]
            if code.per_noun and wire.endswith(suffix) and len(wire) > len(suffix):
                return code, wire[: len(wire) - len(suffix)]
        raise ValueError(f"{wire!r} is not a gateway error code")


NOUN = "{noun}"

AUTHORIZATION_META = "io.modelcontextprotocol/authorization"
"""SEP-2643: the ``_meta`` key of a structured authorization denial on an isError CallToolResult."""
APPROVAL_HINT = "mcp-safety-gateway/approval"
"""The remediation hint naming an approval on the gateway's page: its id, how many people must approve, how many
have, whether the caller may not be one of them (four eyes), and until when."""
SCOPE_DETAIL = "mcp-safety-gateway/tool"
"""The RFC 9396 ``authorization_details`` type of a call of one tool: its ``privileges`` are the scopes it needs."""
CONFIRMATION_HINT = "mcp-safety-gateway/confirmation"
"""The remediation hint naming a person's yes in the client: a client that declares form elicitation (the
``capability`` it needs) is asked in one of ``modes``."""
AVAILABLE = "available"
UNAVAILABLE = "unavailable"


def authorization_denial(
    remediation: str,
    hints: list[dict[str, Any]] | None = None,
    *,
    context: str | None = None,
    credential: str | None = None,
) -> dict[str, Any]:
    """A structured authorization denial (SEP-2643): ``remediation`` available or unavailable, the hints that say
    what would let the call through, a correlation ``context`` (never authority), a ``credential`` disposition."""
    envelope: dict[str, Any] = {"reason": "insufficient_authorization", "remediation": remediation}
    if context is not None:
        envelope["authorizationContextId"] = context
    if credential is not None:
        envelope["credentialDisposition"] = credential
    if hints:
        envelope["remediationHints"] = hints
    return envelope


def approval_hints(
    url: str, approval_id: str, expires_at: str, needed: int, approved: int, four_eyes: bool
) -> list[dict[str, Any]]:
    """What lets a write waiting on the approval page through: the page (``url``) and who must approve there."""
    people = {
        "type": APPROVAL_HINT,
        "approvalId": approval_id,
        "approversNeeded": needed,
        "approvedSoFar": approved,
        "callerMayApprove": not four_eyes,
        "expiresAt": expires_at,
    }
    return [{"type": "url", "url": url}, people]


def scope_hint(tool: str, scopes: list[str], resource: str | None) -> dict[str, Any]:
    """What lets a call past a missing scope: a token whose grant holds ``scopes`` for ``tool`` (RFC 9396)."""
    detail: dict[str, Any] = {"type": SCOPE_DETAIL, "identifier": tool, "actions": ["tools/call"], "privileges": scopes}
    if resource is not None:
        detail["locations"] = [resource]
    return {"type": "oauth_authorization_details", "authorization_details": [detail]}


def confirmation_hint(modes: list[str]) -> dict[str, Any]:
    """What lets a write through that needs a person's yes in the client: an elicitation form it can show."""
    return {"type": CONFIRMATION_HINT, "capability": "elicitation.form", "modes": modes}


@dataclass(frozen=True)
class Meaning:
    """What a code says happened, and what the caller should do next."""

    happened: str
    next_step: str


MEANINGS: dict[Code, Meaning] = {
    Code.INVALID_ARGUMENTS: Meaning(
        'the arguments do not match the tool\'s `inputSchema` (nothing is coerced: `"10"` is not `10`)',
        "fix them; the message names the field",
    ),
    Code.REQUEST_TOO_LARGE: Meaning("past `[limits]` (depth, elements, string size)", "send less"),
    Code.INVALID_CURSOR: Meaning(
        "a cursor this gateway did not issue (or signed with a key no longer in `GATEWAY_SECRET_KEY`)",
        "list again without a cursor",
    ),
    Code.FORBIDDEN: Meaning(
        "the token lacks a scope the tool needs (`details.missingScopes`)", "get a token with that scope"
    ),
    Code.CALLER_REVOKED: Meaning(
        "a write the gateway made again later for its caller (a task, once people approved) found the caller no longer"
        " allowed: its token removed from `[auth]`, no longer active or expired, or without the scope"
        " (`details.reason`); nothing was written, the plan is used up",
        "get a credential that allows the tool, then preview again",
    ),
    Code.DENIED: Meaning(
        "an approval rule denies this write (`details.rule`), e.g. a blast-radius budget is spent",
        "do not retry it; ask an operator",
    ),
    Code.STATEMENT_REFUSED: Meaning(
        "a statement tool refused the SQL before anything ran (`details.reason`: several_statements, unparsable,"
        " class_mismatch, hidden_write, not_a_read, class_not_allowed, table_not_allowed, function_not_allowed, ...)",
        "write one plain statement of an allowed class on allowed tables; a write goes to the statement preview tool",
    ),
    Code.RATE_LIMITED: Meaning("the caller's token bucket is empty", "wait `details.retryAfterSeconds`"),
    Code.TARGET_NOT_FOUND: Meaning(
        "no target by that id (the code names the target's `noun`: `tenant_not_found` in the default config, "
        '`database_not_found` where `noun = "database"`)',
        "list the targets to see which exist",
    ),
    Code.TARGET_PROTECTED: Meaning(
        "the target is protected (by its flag or an id glob); spelled with the `noun` like the row above "
        "(`tenant_protected` by default)",
        "protected targets are not changed through the gateway",
    ),
    Code.PLAN_NOT_FOUND: Meaning("no plan by that id for this caller (or it was used)", "preview again"),
    Code.PLAN_EXPIRED: Meaning("the plan outlived `plan_ttl_seconds`", "preview again"),
    Code.PLAN_STALE: Meaning("the target changed since the preview", "preview again, check the new numbers"),
    Code.CONFIRMATION_UNAVAILABLE: Meaning(
        "the client cannot show a form (no elicitation capability, or no back-channel)",
        "use a client that supports elicitation, over stdio or stateful HTTP",
    ),
    Code.NOT_CONFIRMED: Meaning(
        "declined, cancelled, wrong typed confirmation, no answer in time, rejected on the approval page, or the"
        " approval link not opened",
        "nothing was changed; a form's decline or cancel, or a Reject on the page, used the plan up: preview again"
        " only if the user wants it; a link not opened used nothing up (the write still waits at `details.url`:"
        " retry with the same key)",
    ),
    Code.APPROVAL_PENDING: Meaning(
        "the write waits for people to approve it on the gateway's page (`details.url`, until `details.expiresAt`)",
        "show the link to the user; once approved, retry the same call with the same key",
    ),
    Code.IDEMPOTENCY_KEY_REUSED: Meaning("this key already belongs to another plan", "use a new key for a new plan"),
    Code.REQUEST_IN_PROGRESS: Meaning("a call with this key (or this plan) is running", "retry the same call shortly"),
    Code.OUTCOME_UNKNOWN: Meaning(
        "sent to the backend, no answer; it may have written",
        "read `details.current`; never retry with a new key blindly",
    ),
    Code.BACKEND_UNAVAILABLE: Meaning(
        "the backend (`details.backend` names it) could not be reached; nothing was sent", "retry with the same key"
    ),
    Code.STORE_UNAVAILABLE: Meaning(
        "the gateway's own state store (Redis, PostgreSQL) could not be reached; nothing was sent (HTTP 503 with"
        " this code in `error.data` when it happens while a session opens)",
        "retry with the same key once it is back; tell the operator if it persists (`/readyz` says `store: down`)",
    ),
    Code.BACKEND_ERROR: Meaning("the backend refused or answered nonsense", "preview again; check the backend"),
    Code.INTERNAL_ERROR: Meaning(
        "the gateway failed before it sent the write (its log names the fault); nothing was changed, the key is free",
        "preview again (or retry later with the same key); tell the operator if it persists",
    ),
    Code.TOO_MANY_SESSIONS: Meaning(
        "HTTP 429 to `initialize`: this caller already holds `[http] max_sessions_per_caller` open sessions",
        "reuse a session, end unused ones (`DELETE`), or wait for them to expire",
    ),
    Code.TOO_MANY_APPROVALS: Meaning(
        "this caller already has `[approvals] max_pending_per_caller` writes waiting on the approval page",
        "wait for people to decide the pending ones (or let them expire); nothing was changed",
    ),
    Code.TOO_MANY_TASKS: Meaning(
        "this caller already has `[approvals] max_tasks_per_caller` live tasks (url-mode writes followed as MCP tasks)",
        "wait for some to finish, or cancel them with `tasks/cancel`; nothing was changed",
    ),
    Code.PROXIED_REQUEST_REFUSED: Meaning(
        "HTTP 403: a request relayed by a proxy (`Forwarded` / `X-Forwarded-*`) reached a gateway without `[auth]`",
        "configure an `[auth]` verifier; without one the gateway serves only its own machine",
    ),
}


class ToolError(Exception):
    """A refusal with a stable code, a message naming the next step, and optional details."""

    def __init__(
        self,
        code: Code | str,
        message: str,
        *,
        noun: str | None = None,
        next_tool: str | None = None,
        details: dict[str, Any] | None = None,
        authorization: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        if isinstance(code, Code):
            self.code, spelled_noun = code, None
        else:
            self.code, spelled_noun = Code.parse(code)  # ValueError for a code outside the enumeration
        self.noun = noun or spelled_noun
        self.wire_code = self.code.spelled(self.noun)  # ValueError for a target code without its noun
        self.message = message
        self.next_tool = next_tool
        self.details = details
        self.authorization = authorization
        """The structured denial (``authorization_denial``) of a refusal whose way out is an authorization."""

    def __repr__(self) -> str:
        return f"ToolError(code={self.wire_code!r}, message={self.message!r})"

    def body(self) -> dict[str, Any]:
        """The JSON object sent to the client."""
        body: dict[str, Any] = {"code": self.wire_code, "message": self.message}
        if self.next_tool is not None:
            body["nextTool"] = self.next_tool
        if self.details is not None:
            body["details"] = self.details
        return body


class StoreUnavailable(Exception):
    """The state store could not be reached (a shared store's server is down or unreachable); fail closed."""


class OutcomeNotRecorded(StoreUnavailable):
    """A settle stored its audit entry (``entry``, as sealed) but not the key's outcome (Redis: the entry and the
    key are two steps). The outcome is to be settled again without the entry, which is never stored twice."""

    def __init__(self, message: str, entry: AuditEntry) -> None:
        super().__init__(message)
        self.entry = entry


class StoreInUse(Exception):
    """Another process serves this store, and the store serves one process at a time (SQLite); the message is a
    sentence naming that process."""


def markdown_table() -> str:
    """The troubleshooting table of the README, one row per code."""
    rows = ["| code | what happened | what to do |", "| --- | --- | --- |"]
    rows += [f"| `{code.value}` | {meaning.happened} | {meaning.next_step} |" for code, meaning in MEANINGS.items()]
    return "\n".join(rows)


if __name__ == "__main__":  # python -m gateway.errors: the README's troubleshooting table
    print(markdown_table())
