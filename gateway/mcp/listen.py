"""``subscriptions/listen`` (2026-07-28): what a stateless client hears without asking again.

A listen request's answer is a stream; it carries what the client asked for and the gateway serves:

    toolsListChanged   ``notifications/tools/list_changed`` whenever the published tools change (a backend went
                       down or came back: gateway.catalog.live), as 2025-era sessions hear it on their own stream
    taskIds            ``notifications/tasks`` (the tasks extension) for the caller's own live tasks: the task as
                       ``tasks/get`` shows it, once at the start, again whenever that changes, last when it ends

The acknowledgement names what is honoured: never prompts or resources (the gateway has none), and only those task
ids that are this caller's live tasks (another caller's id is left out exactly as an unknown one is, so a stream
tells nobody that someone else's task exists). Asking for tasks without declaring the extension is -32021, naming
it, as the extension requires. A task's state is read from the store every POLL_SECONDS (the read a ``tasks/get``
makes, never a backend call), so a task decided or resumed on another replica is heard on this one; a stream that
asked for tasks alone ends gracefully once every one of them has ended, and every stream does when the process
stops serving (so a SIGTERM is not held up by a client that listens).

A stream is a held request that reads the store, so they are bounded: as many task ids per stream as a caller may
have live tasks (``[approvals] max_tasks_per_caller``), MAX_STREAMS_PER_CALLER streams per caller and MAX_STREAMS
in all on one process (beyond that: -32600, saying which), each task read once per READ_SECONDS: at most
4 x 20 tasks a second per caller with the defaults, each one read of the task and one of its approval.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal, cast

import anyio
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY

from gateway.identity.caller import current_caller
from gateway.mcp.tasks import POLL_SECONDS, detailed, require_extension
from gateway.protocol import STATELESS_ERA, stateless
from gateway.runtime import Gateway

READ_SECONDS = POLL_SECONDS * 2
"""How often a stream reads the tasks it follows (the poll interval tasks/get suggests, pollIntervalMs), unless the
gateway says otherwise (Gateway.listen_read_seconds: tests that wait for a stream shorten it)."""
MAX_STREAMS_PER_CALLER = 4
"""The most streams one caller holds open on one process at once."""
MAX_STREAMS = 1024
"""The most streams one process holds open at once."""


class TaskNotification(types.Notification[dict[str, Any], Literal["notifications/tasks"]]):
    """``notifications/tasks``: the task as ``tasks/get`` shows it (the extension's DetailedTask), flat."""

    method: Literal["notifications/tasks"] = "notifications/tasks"
    params: dict[str, Any]


class Streams:
    """The listen streams open on this process, counted per caller."""

    def __init__(self) -> None:
        self.open: Counter[str] = Counter()

    @contextmanager
    def held(self, caller: str) -> Iterator[None]:
        """One more stream for ``caller`` while the block runs; -32600 past a limit."""
        if sum(self.open.values()) >= MAX_STREAMS:
            raise MCPError(types.INVALID_REQUEST, f"This gateway already holds {MAX_STREAMS} listen streams")
        if self.open[caller] >= MAX_STREAMS_PER_CALLER:
            raise MCPError(
                types.INVALID_REQUEST,
                f"This caller already holds {MAX_STREAMS_PER_CALLER} listen streams; close one before opening another",
            )
        self.open[caller] += 1
        try:
            yield
        finally:
            self.open[caller] -= 1
            if not self.open[caller]:
                del self.open[caller]


def register(server: Server[Any], gw: Gateway) -> None:
    """Serve ``subscriptions/listen`` on ``server`` (which makes 2026 clients see ``tools.listChanged``)."""
    streams = Streams()

    async def listen(
        ctx: ServerRequestContext[Any, Any], params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        if ctx.request_id is None:
            raise MCPError(types.INVALID_REQUEST, "subscriptions/listen requires a request id")
        if not stateless(ctx.protocol_version):
            raise MCPError(types.METHOD_NOT_FOUND, f"subscriptions/listen needs protocol version {STATELESS_ERA}")
        caller = current_caller(gw.config.gateway.stdio_caller)
        with streams.held(caller):
            return await _stream(gw, ctx, params.notifications, caller)

    server.add_request_handler("subscriptions/listen", types.SubscriptionsListenRequestParams, listen)


async def _stream(
    gw: Gateway, ctx: ServerRequestContext[Any, Any], wanted: types.SubscriptionFilter, caller: str
) -> types.SubscriptionsListenResult:
    asked = (wanted.model_extra or {}).get("taskIds") or []
    if not isinstance(asked, list) or not all(isinstance(task_id, str) for task_id in asked):
        raise MCPError(types.INVALID_PARAMS, "notifications.taskIds must be a list of task ids")
    if asked:
        require_extension(ctx)
    tools = wanted.tools_list_changed is True
    following = await _own_live(gw, caller, asked[: gw.config.approvals.max_tasks_per_caller])
    meta: dict[str, Any] = {SUBSCRIPTION_ID_META_KEY: ctx.request_id}
    honored = types.SubscriptionFilter(tools_list_changed=True if tools else None)
    if asked:
        honored = honored.model_copy(update={"taskIds": following})
    ack = types.SubscriptionsAcknowledgedNotification(
        params=types.SubscriptionsAcknowledgedNotificationParams(notifications=honored, _meta=meta)
    )
    await ctx.session.send_notification(ack, related_request_id=ctx.request_id)
    seen_tools = gw.tools_version
    shown: dict[str, dict[str, Any]] = {}
    while (tools or following) and not gw.closing:
        for task_id in list(following):
            task = await gw.store.get_task(task_id)
            if task is None or gw.clock() >= task.expires_at:
                following.remove(task_id)
                continue
            now_shown = detailed(gw, task, await gw.store.get_approval(task.approval_id))
            if now_shown != shown.get(task_id):
                shown[task_id] = now_shown
                note = TaskNotification(params={**now_shown, "_meta": {**now_shown.get("_meta", {}), **meta}})
                await ctx.session.send_notification(cast(types.ServerNotification, note), ctx.request_id)
            if task.terminal:
                following.remove(task_id)
        if gw.closing or not (tools or following):
            break
        with anyio.move_on_after((gw.listen_read_seconds or READ_SECONDS) if following else math.inf):
            await gw.tools_changed(seen_tools)
        if tools and gw.tools_version != seen_tools and not gw.closing:
            seen_tools = gw.tools_version
            changed = types.ToolListChangedNotification(params=types.NotificationParams(_meta=meta))
            await ctx.session.send_notification(changed, related_request_id=ctx.request_id)
    return types.SubscriptionsListenResult(_meta=meta)


async def _own_live(gw: Gateway, caller: str, task_ids: list[str]) -> list[str]:
    """The ids among ``task_ids`` that name this caller's live tasks, in the order asked, each once."""
    own: list[str] = []
    for task_id in dict.fromkeys(task_ids):
        task = await gw.store.get_task(task_id) if len(task_id) <= 128 else None  # no task id is longer
        if task is not None and task.caller == caller and gw.clock() < task.expires_at:
            own.append(task_id)
    return own
