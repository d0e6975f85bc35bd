"""The order every tool call passes, written once: a list of steps, each ``async def step(call, call_next)``.

    observe          gateway.mcp.server: a span, the call's log line and metrics (around everything, unknown
                     tools included), then the route: a tool hidden from the caller answers as unknown (-32602)
    audit_refusals   a tool that writes opens its one audit entry here, so a refusal by any later step is audited
                     with the code the caller sees (gateway.write.audited.decided)
    authorize        the caller's scopes cover the tool (forbidden, for a tool the operator keeps visible)
    rate_limit       the caller's token bucket (rate_limited)
    size_caps        depth, elements and string sizes (request_too_large), before the schema walks the arguments
    input_schema     the tool's strict inputSchema (invalid_arguments; nothing is coerced)
    the tool         its kind carries the admitted call out (gateway.tools.kinds)

Each step gets the call routed to its kind (gateway.tools.kinds.kind.ToolCall) and asks the call, never the
tool's class: a tool that writes is one whose call opened an audit entry (``audited``).

The README's request-order table and the step table of gateway.write.steps state this order;
tests/unit/test_layout.py holds the README to ``CHAIN``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from gateway.catalog.published import refuse_oversized
from gateway.identity.caller import authorize as authorize_scopes
from gateway.identity.caller import current_scopes
from gateway.protocol import resuming
from gateway.tools.kinds.kind import ToolCall
from gateway.write.audited import Answer, decided

Call = ToolCall[Any]
Next = Callable[[Call], Awaitable[Answer]]
Step = Callable[[Call, Next], Awaitable[Answer]]


async def audit_refusals(call: Call, call_next: Next) -> Answer:
    """A writing tool's call leaves exactly one audit entry for its decision, refusals included."""
    if call.audited is None:
        return await call_next(call)
    return await decided(call.audited, call.arguments, lambda: call_next(call))


async def authorize(call: Call, call_next: Next) -> Answer:
    """The caller's scopes cover the tool."""
    authorize_scopes(call.gw.config, call.published.name, current_scopes())
    return await call_next(call)


async def rate_limit(call: Call, call_next: Next) -> Answer:
    """The caller calls this tool no more often than its bucket allows (a task the gateway resumes was counted
    when the caller made the call)."""
    if resuming.get() is None:
        await call.gw.limiter.check(call.caller, call.published.name)
    return await call_next(call)


async def size_caps(call: Call, call_next: Next) -> Answer:
    """The arguments are within the configured depth, element and string caps."""
    refuse_oversized(call.arguments, call.gw.config.limits)
    return await call_next(call)


async def input_schema(call: Call, call_next: Next) -> Answer:
    """The arguments fit the tool's inputSchema exactly."""
    call.published.validate_arguments(call.arguments)
    return await call_next(call)


CHAIN: tuple[Step, ...] = (audit_refusals, authorize, rate_limit, size_caps, input_schema)


async def run(call: Call) -> Answer:
    """Pass the call through every step of ``CHAIN`` in order, then to its tool."""

    async def step(index: int, current: Call) -> Answer:
        if index == len(CHAIN):
            return await current.kind.call(current, current.arguments)
        return await CHAIN[index](current, lambda after: step(index + 1, after))

    return await step(0, call)
