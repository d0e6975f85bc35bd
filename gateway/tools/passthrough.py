"""A read-only pass-through tool: one of a backend's own tools, published on purpose (gateway.config.passthrough).

It is a checked relay: the arguments were checked against the published input schema (by the MCP surface's
chain, before this module runs), the backend's tool is called (retried once on a fresh connection, as any
read), and its answer must be a JSON object that fits the published output schema and the ``[limits]`` caps on
depth, elements and string size (the caps a caller's arguments are held to), else ``backend_error``.
A pass-through tool that is not read-only writes: gateway.write.passthrough.
"""

from __future__ import annotations

from typing import Any

from gateway.backend import BackendUnavailable, unreachable
from gateway.catalog.answers import answer_of
from gateway.catalog.published import PublishedTool
from gateway.config import PassthroughTool
from gateway.errors import Code, ToolError
from gateway.records import Reply
from gateway.runtime import Gateway


async def relay(gw: Gateway, published: PublishedTool, config: PassthroughTool, args: dict[str, Any]) -> dict[str, Any]:
    """Call a read-only pass-through tool: the backend's answer, when it is what the output schema describes."""
    backend = gw.backend_for(published.name)
    try:
        reply = await backend.read_tool(config.source_name(published.name), args, config.timeout_seconds)
    except BackendUnavailable:
        raise unreachable(gw.config.backend_of(published.name)) from None
    body = answer_of(published, reply, gw.config.limits)
    if body is None:
        raise ToolError(Code.BACKEND_ERROR, f"The backend's {published.name} answered {_failure(reply)}.")
    return body


def _failure(reply: Reply) -> str:
    return "with an error" if reply.is_error else "something its outputSchema or the gateway's [limits] do not allow"
