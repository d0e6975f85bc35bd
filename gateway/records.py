"""The records the gateway keeps and passes around: plain frozen dataclasses, standard library only.

    Plan        a previewed write, bound to a caller, expiring              (issued by preview, kept by stores)
    Expired     what is left of a plan after its TTL: who owned it         (so its owner hears plan_expired)
    KeyRecord   what one (caller, idempotencyKey) did or is doing          (claimed, settled, replayed)
    Claim       the answer to an atomic claim of a key and its plan
    AuditEntry  one decision of a write tool, hash-chained when stored
    Reply       the god-tool's answer: its error flag and its text
    Approval    a write waiting for (or given) the yes of people on the approval page, with their decisions
    ApproverSession  a person signed in on the approval page, kept so every replica agrees and it can be revoked
    Passkey     a person's enrolled WebAuthn credential: the public key their approvals are signed with
    Task        a url-mode write a client follows as an MCP task while people decide, and its result

and the tables of a key's life (KEY_TRANSITIONS), which the write path and every store consult, and of a task's
(TASK_TRANSITIONS).

Nothing here does I/O or imports the MCP SDK, so the write path's decisions (gateway.write.steps) can be
read, imported and tested on their own.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

TOMBSTONE_SECONDS = 3600
"""How long an expired plan's owner still hears plan_expired (anyone else: plan_not_found)."""
WRITE_WINDOWS = {"minute": 60.0, "hour": 3600.0, "day": 86400.0}
"""The windows blast-radius counters count writes in (approval rules read ``writes.caller.hour`` and so on)."""

KeyState = Literal["in_flight", "applied", "unknown", "error"]

ABSENT = "absent"
"""The state of a key no record is stored under."""

KEY_TRANSITIONS: dict[tuple[str, str], str] = {
    (ABSENT, "claim"): "in_flight",
    ("in_flight", "release"): ABSENT,
    ("in_flight", "applied"): "applied",
    ("in_flight", "unknown"): "unknown",
    ("in_flight", "error"): "error",
}
"""The idempotency key's life, ``(state, event) -> next state``, and the only place it is written down: a key is
claimed before the backend is called and ends applied, unknown or error; only a claim whose call was never sent
is released. Every store asks this table before it changes a key (gateway.stores.base.key_moves; the Redis store
passes ``key_leaves(event)`` to its scripts), and an event the table does not list from the stored state changes
nothing. The settling events are named after the state they end in."""


def next_key_state(state: str, event: str) -> str:
    """The key's state after an event; ValueError for a transition the write path never makes."""
    try:
        return KEY_TRANSITIONS[(state, event)]
    except KeyError:
        raise ValueError(f"illegal idempotency transition: {event!r} from {state!r}") from None


def key_leaves(event: str) -> list[str]:
    """The states ``event`` may take a key from, as KEY_TRANSITIONS lists them (ABSENT: no record stored)."""
    return sorted(state for state, listed in KEY_TRANSITIONS if listed == event)


@dataclass(frozen=True)
class Plan:
    """A previewed write: what it will do, to what, for whom, until when."""

    plan_id: str
    caller: str
    tool: str
    target: str
    version: Any
    arguments: dict[str, Any]
    summary: dict[str, Any]
    expires_at: float
    in_use_by: str | None = None
    approval: dict[str, Any] | None = None
    """How this plan must be confirmed, fixed at preview (gateway/approvals/policy.py): ``mode``, ``rule``,
    ``approvers``, ``four_eyes``, ``notify``. None for a plan issued before rules existed: the tool's setting."""


@dataclass(frozen=True)
class Expired:
    """What is left of a plan after its TTL: who owned it, for an hour."""

    caller: str


@dataclass(frozen=True)
class KeyRecord:
    """What one (caller, idempotencyKey) did, or is doing.

    ``tool`` and ``version_before`` come from the plan at claim time, so a key left in flight by a crash can
    be audited truthfully after its plan is gone."""

    caller: str
    key: str
    plan_id: str
    target: str
    state: KeyState
    result: dict[str, Any] | None = None
    tool: str | None = None
    version_before: Any = None


@dataclass(frozen=True)
class Claim:
    """The answer to an atomic claim: claimed, or why not."""

    claimed: bool
    existing: KeyRecord | None = None
    plan_busy: bool = False


@dataclass(frozen=True)
class AuditEntry:
    """One decision of a write tool. ``seq``, ``prev_hash``, ``key_id`` and ``hash`` are set by the store when it
    seals the entry into the chain (gateway.audit.chain)."""

    at: float
    caller: str
    tool: str
    outcome: str
    plan_id: str | None = None
    idempotency_key: str | None = None
    target: str | None = None
    version_before: Any = None
    version_after: Any = None
    confirmation: str | None = None
    code: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    seq: int = 0
    prev_hash: str = ""
    hash: str = ""
    key_id: str = ""


@dataclass(frozen=True)
class Reply:
    """The god-tool's answer: its error flag and its text (JSON when well-formed and no deeper than
    ``max_depth`` nested arrays and objects: the backend client passes ``[limits] max_depth``)."""

    is_error: bool
    text: str
    max_depth: int = 16

    @cached_property
    def _decoded(self) -> Any:
        return bounded_json(self.text, self.max_depth)

    def json(self) -> Any:
        """The decoded JSON text, or None when the text is not JSON or nested too deeply."""
        return self._decoded


_KEPT = b'"[]{}'
_DROPPED = bytes(byte for byte in range(256) if byte not in _KEPT)
_QUOTED = re.compile(rb'"[^"]*"')
_INNERMOST = re.compile(rb"\[\]|\{\}")


def nesting_within(text: str, max_depth: int) -> bool:
    """Whether JSON text nests arrays and objects at most ``max_depth`` deep, found without recursion.

    Escaped backslashes and quotes are dropped, then everything but quotes and brackets; what strings remain
    are dropped (adjacent quotes first: string contents are only brackets by then); each pass then removes the
    innermost bracket pairs. Text no deeper than ``max_depth`` is empty within that many passes. ~10 ms per MB."""
    raw = text.encode("utf-8", "surrogatepass").replace(b"\\\\", b"").replace(b'\\"', b"")
    brackets = _QUOTED.sub(b"", raw.translate(None, _DROPPED).replace(b'""', b""))
    for _ in range(max_depth):
        if not brackets:
            return True
        brackets, removed = _INNERMOST.subn(b"", brackets)
        if not removed:
            return False
    return not brackets


def bounded_json(text: str, max_depth: int) -> Any:
    """JSON text decoded, or None when it is not JSON or nests deeper than ``max_depth`` (a recursive decoder
    would otherwise meet answers nested 100,000 deep with RecursionError)."""
    if not nesting_within(text, max_depth):
        return None
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


@dataclass(frozen=True)
class Decision:
    """One approver's answer on the approval page."""

    approver: str
    """Who: ``person_id(issuer, subject)`` (gateway/identity/person.py), for a sign-in and an approver token alike."""
    name: str
    """What is shown beside them: the configured display claim, a verified email, or an approver token's name."""
    verdict: Literal["approve", "reject"]
    at: float
    assertion: dict[str, str] | None = None
    """With passkeys required: the WebAuthn assertion the person's authenticator made over this decision's
    challenge (gateway.approvals.passkeys): ``credentialId``, ``authenticatorData``, ``clientDataJSON`` and
    ``signature``, base64url. Without it, or with one that does not verify, the decision approves nothing."""


@dataclass(frozen=True)
class Approval:
    """A planned write that waits for people to approve it on the gateway's own page (``confirm = "url"``).

    It is bound to the plan it was made for (id, caller, tool, target, version, numbers): an approval of other
    facts approves nothing. ``caller_person`` is the caller's own ``person_id(issuer, subject)``, so that with
    ``four_eyes`` nobody approves their own write. ``rev`` counts stored changes (stores replace it only over
    the revision it was read at)."""

    approval_id: str
    plan_id: str
    caller: str
    caller_person: str | None
    tool: str
    target: str
    version: Any
    arguments: dict[str, Any]
    summary: dict[str, Any]
    message: str
    requested_at: float
    expires_at: float
    approvers_needed: int
    four_eyes: bool
    decisions: tuple[Decision, ...] = ()
    rev: int = 0
    rule: str | None = None
    """The approval rule that asked for people (None: the tool's own ``confirm = "url"``)."""
    caller_display: str | None = None
    """What the page shows beside the requester's (issuer, subject): their token's display claim or verified email."""
    target_name: str | None = None
    """The target's name as the backend reported it when the approval was asked for (shown quoted: its report)."""
    result: dict[str, Any] | None = None
    """What became of the write once approved, recorded by the write path (gateway/approvals/results.py):
    ``outcome`` (applied, unknown, backend_error, refused), ``code``, ``version`` after it, ``at``."""
    cancelled_at: float | None = None
    """When the caller cancelled the write before it was claimed (``tasks/cancel``): the approval is ended, and
    no decision is taken after it (gateway/approvals/lifecycle.py)."""
    digest: str | None = None
    """The digest of the facts people approve (gateway.approvals.digest): the write runs only while its facts
    still hash to it."""
    waits_until: float | None = None
    """Until when a call of the caller waits on this approval and runs the write as soon as it is approved (a
    pushed 2025-11-25 link, 2026-07-28 rounds, an MCP task that resumes by itself): the page says "running now"
    rather than "waiting for the agent's retry" while it lasts."""
    facts: dict[str, Any] | None = None
    """The canonical facts ``digest`` is taken over (gateway.approvals.digest.facts_of), kept so the proposed
    event carries them and anyone can recompute the digest a passkey signed."""


@dataclass(frozen=True)
class ApproverSession:
    """A person signed in on the approval page. Kept in the store, so every replica reads the same sessions, a
    sign-out or an operator revokes one everywhere, and each request checks it against the current config."""

    session_id: str
    """The SHA-256 of the cookie's secret (``as_`` + 22 characters): what the operator sees and revokes by. The
    store never holds what the browser presents."""
    person: str
    """``person_id(issuer, subject)`` (gateway/identity/person.py)."""
    name: str
    """What is shown beside the person (display claim, verified email, or the approver token's name)."""
    via: Literal["oidc", "token"]
    audience: str
    """The page's public URL the person signed in at: the session is accepted there only."""
    csrf: str
    created_at: float
    expires_at: float
    facts: dict[str, Any] = field(default_factory=dict)
    """What ``[approvals.approvers]`` is checked against on every decision (``sub``, ``iss``, a verified
    ``email``, and ``claims``: the ID-token claims the rule reads)."""
    token_sha256: str | None = None
    """For a token sign-in, the configured token's SHA-256: a token removed from the config ends its sessions."""


@dataclass(frozen=True)
class Passkey:
    """A WebAuthn credential a person enrolled on the approval page: their approvals are signed with its private
    key, which never leaves their authenticator. Kept until revoked, and after (old signatures stay checkable)."""

    credential_id: str
    """The credential's id, base64url: what an assertion names and an operator revokes by."""
    public_key: str
    """The COSE public key, CBOR then base64url, as the authenticator reported it at enrolment."""
    person: str
    """Whose it is: ``person_id(issuer, subject)`` (gateway/identity/person.py) of the session that enrolled it."""
    name: str
    """What is shown beside the person (as in ApproverSession)."""
    label: str
    """What the person called it ("laptop", "security key")."""
    created_at: float
    sign_count: int = 0
    """The authenticator's signature counter as last seen; a decision whose counter does not go up (once it
    counts at all) is refused as a cloned authenticator's."""
    revoked_at: float | None = None
    rev: int = 0


TaskStatus = Literal["working", "input_required", "completed", "failed", "cancelled"]
TERMINAL: frozenset[str] = frozenset({"completed", "failed", "cancelled"})

TASK_TRANSITIONS: dict[str, frozenset[str]] = {
    "input_required": frozenset({"working", "completed", "failed", "cancelled"}),
    "working": frozenset({"input_required", "completed", "failed", "cancelled"}),
    "completed": frozenset(),
    "failed": frozenset(),
    "cancelled": frozenset(),
}
"""A task's life (the tasks extension's state diagram): from waiting on people (``input_required``) or running
(``working``) to one terminal status, which never changes again. The only place it is written down: the gateway
moves a task through ``next_task_status``, and every store refuses to store a move this table does not list from
the status it holds (gateway.stores.base.task_moves; the SQL and Redis stores are passed ``task_leaves``)."""


def task_leaves(status: str) -> list[str]:
    """The statuses a stored task may change to ``status`` from, as TASK_TRANSITIONS lists them: ``status`` itself
    (a change that keeps the status) and every status the table lets move to it."""
    return sorted(current for current, moves in TASK_TRANSITIONS.items() if status == current or status in moves)


@dataclass(frozen=True)
class Task:
    """A url-mode write answered as an MCP task: the call it stands for (tool, arguments, key), the approval it
    waits on, who asked (``identity``: what the gateway acts as when it resumes the call: the caller's client,
    issuer, subject and scopes, never a token), and its status and final result. ``rev`` counts stored changes
    (stores replace it only over the revision it was read at)."""

    task_id: str
    caller: str
    tool: str
    key: str
    arguments: dict[str, Any]
    plan_id: str
    approval_id: str
    created_at: float
    updated_at: float
    expires_at: float
    status: str = "input_required"
    message: str | None = None
    result: dict[str, Any] | None = None
    """The call's result (a CallToolResult as JSON), once completed."""
    error: dict[str, Any] | None = None
    """The JSON-RPC error, once failed."""
    identity: dict[str, Any] = field(default_factory=dict)
    rev: int = 0
    next_try_at: float | None = None
    """After a resumed call that sent nothing (its backend unreachable): not tried again before this time."""
    tool_approval: bool = False
    """The call that made it declared the tool-approval extension (``io.modelcontextprotocol/tool-approval``): the
    task is shown and ended in that draft's shape (gateway.mcp.approval)."""
    digest: str | None = None
    """The digest of the facts its approval asks people to approve (gateway.approvals.digest)."""

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL


def next_task_status(task: Task, status: str) -> str:
    """The status a task may move to; ValueError for one TASK_TRANSITIONS does not list."""
    if task.status not in task_leaves(status):
        raise ValueError(f"illegal task transition: {task.status!r} -> {status!r}")
    return status
