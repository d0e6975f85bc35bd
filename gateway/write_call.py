"""The destructive tool: the steps of ``write_path`` in order, with the I/O each one needs.

Once the key is claimed, the rest runs shielded from cancellation, so a caller that hangs up mid-write
cannot leave the key in flight: the backend call (bounded by its timeout) and the record always finish.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, replace
from typing import Any

import anyio
import mcp.types as types
from mcp.server import ServerRequestContext

from gateway import confirm
from gateway.backend import BackendUnavailable, OutcomeLost, Reply
from gateway.chaos import crash_point
from gateway.config import PreviewTool, WriteTool
from gateway.errors import ToolError
from gateway.runtime import Gateway
from gateway.stores import AuditEntry, KeyRecord, Plan, StoreUnavailable
from gateway.targets import is_protected, version_of
from gateway.templates import MISSING, render
from gateway.write_path import (
    LOST,
    AfterLookup,
    Settlement,
    after_key_lookup,
    check_answer,
    check_can_ask,
    check_plan,
    check_target,
    confirmation_schema,
    needs_reread,
    next_key_state,
    outcome_unknown_body,
    settle,
    template_names,
)

AUDIT_OUTCOMES = {"outcome_unknown": "unknown", "backend_error": "backend_error"}
STORE_DOWN = "The gateway's state store cannot be reached; nothing was sent. Retry with the same idempotencyKey."

log = logging.getLogger(__name__)


@dataclass
class Trail:
    """What the audit entry will say, filled in as the call proceeds."""

    caller: str
    tool: str
    plan_id: str | None
    key: str | None
    target: str | None = None
    version_before: int | None = None
    version_after: int | None = None
    confirmation: str | None = None
    audited: bool = False


@dataclass(frozen=True)
class WriteCall:
    """One call of a write tool: who, which tool, with what."""

    gw: Gateway
    name: str
    config: WriteTool
    preview: PreviewTool
    caller: str

    async def current(self, target_id: str) -> dict[str, Any] | None:
        """The target as it reads now, or None."""
        return await self.gw.reader.find(self.preview.target, target_id)

    async def check_target(self, plan: Plan) -> None:
        """Read the target and refuse if it moved on or became protected."""
        target = self.preview.target
        state = await self.gw.reader.get(target, plan.target)
        check_target(plan, version_of(target, state), is_protected(target, plan.target, state), self.config.preview)


async def run_write(
    call: WriteCall,
    ctx: ServerRequestContext[Any, Any],
    params: types.CallToolRequestParams,
    admit: Callable[[], Awaitable[dict[str, Any]]],
) -> dict[str, Any] | types.InputRequiredResult:
    """Run the write path; exactly one audit entry per decision, none for an InputRequiredResult round."""
    raw = params.arguments or {}
    trail = Trail(call.caller, call.name, _short_text(raw.get("planId")), _short_text(raw.get("idempotencyKey")))
    try:
        try:
            outcome = await _decide(call, ctx, params, await admit(), trail)
        except StoreUnavailable:  # raised only before the backend call: settle's is handled in _write
            raise ToolError("backend_unavailable", STORE_DOWN) from None
    except ToolError as err:
        await _audit(call, trail, AUDIT_OUTCOMES.get(err.code, "refused"), err.code)
        raise
    if isinstance(outcome, types.InputRequiredResult):
        return outcome
    await _audit(call, trail, "replayed" if outcome["replayed"] else "applied", None)
    return outcome


async def _decide(
    call: WriteCall,
    ctx: ServerRequestContext[Any, Any],
    params: types.CallToolRequestParams,
    args: dict[str, Any],
    trail: Trail,
) -> dict[str, Any] | types.InputRequiredResult:
    gw, preview_name = call.gw, call.config.preview
    plan_id, key = args["planId"], args["idempotencyKey"]
    record = await gw.store.get_record(call.caller, key)
    verdict = after_key_lookup(record, plan_id)
    if record is not None:
        trail.target = record.target
        if verdict is AfterLookup.REPLAY:
            trail.version_after = (record.result or {}).get("version")
            return {**(record.result or {}), "replayed": True}
        raise ToolError(**outcome_unknown_body(await call.current(record.target)))
    plan = check_plan(await gw.store.get_plan(plan_id, gw.clock()), call.caller, call.name, preview_name)
    trail.target, trail.version_before = plan.target, plan.version
    check_can_ask(ctx.session.client_capabilities)
    await call.check_target(plan)
    question = confirm.Question(
        message=str(render(call.preview.message, template_names(plan, call.preview.target.noun))),
        schema=confirmation_schema(call.config.confirm, plan),
        caller=call.caller,
        plan_id=plan_id,
        key=key,
        timeout=call.config.prompt_timeout_seconds,
    )
    answer = await confirm.ask(ctx, params, question, gw.store, gw.clock())
    if isinstance(answer, types.InputRequiredResult):
        return answer
    trail.confirmation = answer.action if answer is not None else "timeout"
    check_answer(answer, call.config.confirm, plan)
    record = KeyRecord(call.caller, key, plan_id=plan_id, target=plan.target, state="in_flight")
    return await _write(call, plan, record, trail)


async def _write(call: WriteCall, plan: Plan, record: KeyRecord, trail: Trail) -> dict[str, Any]:
    gw, preview_name = call.gw, call.config.preview
    async with gw.store.lock(plan.target):
        crash_point("before-claim")
        claim = await gw.store.claim(record, gw.clock(), call.config.idempotency_retention_seconds)
        if not claim.claimed:
            return await _not_claimed(call, claim.existing, plan, record)
        with anyio.CancelScope(shield=True):
            crash_point("after-claim")
            try:
                await call.check_target(plan)
            except ToolError:
                await gw.store.release(record)
                raise
            reply: Reply | None
            try:
                payload = render(call.config.call.payload, template_names(plan, call.preview.target.noun))
                reply = await gw.backend.call(call.config.call.action, payload, call.config.call.timeout_seconds)
            except BackendUnavailable:
                await gw.store.release(record)
                raise ToolError(
                    "backend_unavailable",
                    "The legacy backend cannot be reached; nothing was sent. Retry with the same idempotencyKey.",
                ) from None
            except OutcomeLost:
                reply = LOST
            crash_point("after-backend-write")
            current = await call.current(plan.target) if needs_reread(reply, call.config) else None
            reread_version = version_of(call.preview.target, current) if current is not None else MISSING
            settlement = settle(plan, reply, current, reread_version, call.config, preview_name)
            await _record(call, trail, record, settlement)
    error = settlement.error()
    if error is not None:
        raise error
    return {**settlement.result, "replayed": False}


async def _record(call: WriteCall, trail: Trail, record: KeyRecord, settlement: Settlement) -> None:
    """Audit the outcome, then settle the key. The entry goes first: a crash in between leaves the key in flight,
    and the restart adds an outcome_unknown entry for it (gateway.runtime), so no write that reached the backend
    goes unaudited. The key settles even if the audit raises."""
    error = settlement.error()
    if error is None:
        trail.version_after = settlement.result["version"]
    try:
        outcome = "applied" if error is None else AUDIT_OUTCOMES.get(error.code, "refused")
        await _audit(call, trail, outcome, None if error is None else error.code)
    finally:
        crash_point("before-settle")
        try:
            next_key_state(record.state, settlement.state)  # raises if the table in write_path forbids it
            await call.gw.store.settle(replace(record, state=settlement.state, result=settlement.result))
        except StoreUnavailable:
            # The call was sent, so say what happened. The key stays in flight until its lock lapses
            # and then reads outcome_unknown: it never writes again.
            log.error("outcome %s of key %s not recorded: the store is unreachable", settlement.state, record.key)


async def _not_claimed(call: WriteCall, existing: KeyRecord | None, plan: Plan, record: KeyRecord) -> dict[str, Any]:
    """Another call got there first: replay its outcome, or say why this one cannot proceed."""
    if existing is not None:
        if after_key_lookup(existing, record.plan_id) is AfterLookup.REPLAY:
            return {**(existing.result or {}), "replayed": True}
        raise ToolError(**outcome_unknown_body(await call.current(plan.target)))
    check_plan(
        await call.gw.store.get_plan(plan.plan_id, call.gw.clock()),
        call.caller,
        call.name,
        call.config.preview,
    )
    raise ToolError("request_in_progress", "Another call is applying this plan right now. Retry in a few seconds.")


def _short_text(value: Any) -> str | None:
    return value[:128] if isinstance(value, str) else None


async def _audit(call: WriteCall, trail: Trail, outcome: str, code: str | None) -> None:
    """One audit entry per decision; the user's answer, if there was a prompt, is counted too."""
    if trail.audited:
        return
    trail.audited = True
    if trail.confirmation is not None:
        call.gw.metrics.answers.labels(trail.confirmation).inc()
    fields = asdict(trail)
    del fields["audited"]
    entry = AuditEntry(
        at=call.gw.clock(),
        caller=fields.pop("caller"),
        tool=fields.pop("tool"),
        outcome=outcome,
        code=code,
        plan_id=fields.pop("plan_id"),
        idempotency_key=fields.pop("key"),
        **fields,
    )
    try:
        await call.gw.store.append_audit(entry)
    except StoreUnavailable:
        log.error("audit entry not stored, the store is unreachable: %s", entry)
