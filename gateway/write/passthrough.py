"""A pass-through write: one of a backend's own tools that is not read-only, published on purpose
(gateway.config.passthrough). (A read-only one is a checked relay: gateway.tools.passthrough.)

It writes like a planned write, through the same driver (gateway.write.driver: the key first, then the
claim -> send -> settle skeleton), audit entry (gateway.write.audited), decisions (gateway.write.steps), store
records and prompt (gateway.write.ask). What it lacks is a preview, so something must stand in for the plan. What
stands in is the call itself: its arguments (without ``idempotencyKey``), bound to the caller and the key. The
implied plan's id is a digest of (caller, tool, key, arguments), so:

    same key, same arguments        the same implied plan: a finished key replays (``replayed: true``, no prompt,
                                    no call), one in flight answers request_in_progress, a lost one
                                    outcome_unknown (``details.current`` is null: there is no target to re-read)
    same key, other arguments       another plan: idempotency_key_reused, before any prompt
    a 2026 retry                    its sealed state names the implied plan, so an answer given for other
                                    arguments is not counted

As for a planned write, a refusal while the key was free answers as the key if another call with the same key
claimed it meanwhile, and one that meets a write people approved is kept on its approval for the page.

There is no version to re-check (no stale check) and nothing to compute: the prompt states the tool and its
arguments, JSON-encoded with every non-ASCII character escaped (no control, bidi or format character reaches
the person), or the operator's ``message`` with each argument so encoded.

Its mode is chosen when it is called, by the tool's approval rules (gateway.write.choice; they read the caller,
the target argument, the arguments and the write counters): a deny refuses; ``form`` and ``typed`` ask the client;
``url`` asks people on the approval page, bound to the implied plan, which is then stored on the first call (with
``approval_ttl_seconds`` to live) so that every retry with the same key and arguments waits for the same approval.
After a yes the implied plan is put in the store and claimed with the key in one atomic step, exactly as a planned
write claims its plan (so the at-most-once record, the lock, recovery after a crash and the audit entry are the
planned write's own), after the rules that read the counters decided once more under the lock. The write counts
in the budgets from its claim on; the backend's tool is then called once:

    no connection, nothing sent     release the claim; backend_unavailable (retry with the same key)
    sent, no answer                 outcome_unknown, recorded: the key never calls again
    isError                         backend_error, recorded: a retry with the key replays the refusal
    an answer the output schema     outcome_unknown, recorded: the backend answered, so it may have written,
    does not describe, or past       and the gateway cannot tell what it did
    the [limits] caps
    a fitting answer                applied: the answer with ``replayed: false``, recorded for replay
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types
from mcp.server import ServerRequestContext

from gateway.approvals.policy import scopes_for
from gateway.catalog.answers import answer_of
from gateway.catalog.published import PublishedTool
from gateway.config import Limits, PassthroughTool
from gateway.config.expressions import render
from gateway.errors import Code, ToolError
from gateway.records import Expired, Plan, Reply
from gateway.write.ask.yes import ask
from gateway.write.audited import Answer, Interim
from gateway.write.choice import chosen
from gateway.write.driver import ClaimedWrite, Sender, carry_out
from gateway.write.steps import LOST, Settlement, outcome_unknown_body

KEY = "idempotencyKey"
PROMPT_ARGUMENTS_CHARS = 1000
"""Longer arguments are cut in the prompt (and the prompt says so)."""


@dataclass
class PassthroughCall(ClaimedWrite[PassthroughTool]):
    """One call of a pass-through tool that writes."""

    published: PublishedTool = field(kw_only=True)

    @property
    def start_over(self) -> None:
        return None  # no preview: the same call again is the way to start over

    async def current(self, target: str) -> None:
        """Nothing to read: a pass-through write has no target state (its rules read ``{}``)."""
        return None

    async def before_claim(self, plan: Plan) -> None:
        """The implied plan goes into the store (a url-mode call's is there since it asked), so the store's one
        atomic claim of key and plan applies."""
        stored = await self.gw.store.get_plan(plan.plan_id, self.gw.clock())
        if isinstance(stored, Expired):  # a url-mode call's plan, stored when it asked, outlived by the approval
            raise _expired()
        if stored is None:
            await self.gw.store.put_plan(plan, self.gw.clock())

    async def prepared(self, plan: Plan) -> Sender:
        """Nothing to re-check (there is no version); the write counts against the budgets from here on, before
        it is sent: the backend's own tool with the caller's arguments."""
        await self.gw.store.count_write(list(scopes_for(self.caller, self.name).values()), self.gw.clock())
        backend, source = self.gw.backend_for(self.name), self.config.source_name(self.name)
        return lambda: backend.call_tool(source, plan.arguments, self.config.timeout_seconds)

    async def outcome(self, plan: Plan, reply: Reply | None) -> Settlement:
        """Step 9 (the table in the module docstring)."""
        return settle_call(self.published, reply, self.gw.config.limits)


def implied_plan_id(caller: str, tool: str, key: str, arguments: dict[str, Any]) -> str:
    """The id of the plan a pass-through write's arguments stand for, bound to the caller and the key."""
    canonical = json.dumps([caller, tool, key, arguments], sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return "pt_" + hashlib.sha256(canonical.encode()).hexdigest()[:43]


def prompt(config: PassthroughTool, tool: str, arguments: dict[str, Any], properties: list[str]) -> str:
    """The question: the operator's message, or the tool and its arguments; every value JSON-encoded and ASCII."""
    text = _encoded(arguments)
    if len(text) > PROMPT_ARGUMENTS_CHARS:
        text = text[:PROMPT_ARGUMENTS_CHARS] + "… (cut; the call sends them all)"
    if config.message is None:
        return f"Call {tool} with {text}?"
    names = {name: _encoded(arguments[name]) if name in arguments else "(not given)" for name in properties}
    return str(render(config.message, {**names, "tool": tool, "arguments": text}))


def settle_call(published: PublishedTool, reply: Reply | None, limits: Limits) -> Settlement:
    """Step 9 for a pass-through write (the table in the module docstring)."""
    if reply is not LOST and reply.is_error:
        message = "The backend refused the call. A retry with this idempotencyKey replays this answer."
        details = {"backendMessage": reply.text[:500]}
        return Settlement("error", {"code": Code.BACKEND_ERROR.value, "message": message, "details": details})
    body = answer_of(published, reply, limits)
    if body is None:
        return Settlement("unknown", outcome_unknown_body(None))
    return Settlement("applied", body)


async def decide(
    call: PassthroughCall,
    ctx: ServerRequestContext[Any, Any],
    params: types.CallToolRequestParams,
    args: dict[str, Any],
) -> Answer:
    """An admitted call: the key's replay; or its mode by the rules, the question (a form, or people on the
    approval page), then the write."""
    key = args[KEY]
    arguments = {name: value for name, value in args.items() if name != KEY}
    named = arguments.get(call.config.target_argument) if call.config.target_argument is not None else None
    target = str(named) if named is not None else call.name
    plan_id = implied_plan_id(call.caller, call.name, key, arguments)
    call.note(plan_id=plan_id, target=target)
    return await carry_out(call, key, plan_id, lambda: _confirmed(call, ctx, params, plan_id, key, target, arguments))


async def _confirmed(
    call: PassthroughCall,
    ctx: ServerRequestContext[Any, Any],
    params: types.CallToolRequestParams,
    plan_id: str,
    key: str,
    target: str,
    arguments: dict[str, Any],
) -> Plan | Interim:
    """Its mode by the rules, the question, the yes: the implied plan to claim."""
    gw, config = call.gw, call.config
    choice = await chosen(call, config, target, arguments)
    call.choice = choice
    properties = [name for name in call.published.tool.input_schema.get("properties", {}) if name != KEY]
    message = prompt(config, call.name, arguments, properties)
    if choice.mode == "url":
        plan = await _lasting_plan(call, plan_id, target, arguments)
    else:
        plan = Plan(
            plan_id, call.caller, call.name, target, None, arguments, {}, gw.clock() + config.prompt_timeout_seconds
        )
    asked = await ask(
        call,
        ctx,
        params,
        plan,
        key,
        message,
        choice,
        config.prompt_timeout_seconds,
        ready=_nothing,
        start_over=None,
        policy=config.policy_of(choice.rule),
    )
    return plan if asked is None else asked


async def _lasting_plan(call: PassthroughCall, plan_id: str, target: str, arguments: dict[str, Any]) -> Plan:
    """The implied plan a url-mode call's approval is bound to: stored on the first call, so every retry with the
    same key and arguments finds the same plan (and expiry) until people decide or it expires."""
    gw, now = call.gw, call.gw.clock()
    found = await gw.store.get_plan(plan_id, now)
    if isinstance(found, Plan) and found.caller == call.caller:
        return found
    if isinstance(found, Expired):
        raise _expired()
    expires = now + call.config.approval_ttl_seconds
    plan = Plan(plan_id, call.caller, call.name, target, None, arguments, {}, expires)
    await gw.store.put_plan(plan, now)
    return plan


def _expired() -> ToolError:
    return ToolError(
        Code.NOT_CONFIRMED,
        "The approval for this call expired. Nothing was changed; call again with a new idempotencyKey only if the"
        " change is still wanted.",
    )


async def _nothing() -> None:
    """Nothing to check right before asking: a pass-through write has no target state to re-read (nor a name)."""


def _encoded(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(", ", ": "), ensure_ascii=True)
