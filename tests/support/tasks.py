"""A tasks-extension client for the Python SDK's ``Client``: the extension declared on every request, the
CreateTaskResult a call may answer with, and the task methods sent as the extension's wire spells them.

``Client(..., extensions=[TasksClient()])`` declares ``io.modelcontextprotocol/tasks`` (and ``ToolApprovalClient()``
beside it ``io.modelcontextprotocol/tool-approval``); ``call`` returns what the server answered (a CreateTaskResult
as a dict, or the CallToolResult), and ``get`` / ``update`` / ``cancel`` send the task methods (``get(...,
meta=True)`` keeps the answer's ``_meta``). ``resolved`` follows a task to its end, polling as the server
suggests. ``Heard`` (given to the extension and as the client's message handler) records what
``subscriptions/listen`` streams carry, and ``listening`` holds one open.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, Literal

import anyio
import mcp_types as types
from mcp import Client
from mcp.client.extension import ClaimContext, ClientExtension, NotificationBinding, ResultClaim
from mcp.shared.exceptions import MCPError
from pydantic import ConfigDict, Field

EXTENSION = "io.modelcontextprotocol/tasks"
TOOL_APPROVAL = "io.modelcontextprotocol/tool-approval"
TERMINAL = ("completed", "failed", "cancelled")


class _Answer(types.Result):
    """Any result, every field kept."""

    model_config = ConfigDict(extra="allow")


class CreateTaskResult(types.Result):
    """The task a call is answered with (flat: ``Result & Task``)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)
    result_type: Literal["task"] = Field("task", alias="resultType")
    task_id: str = Field(alias="taskId")
    status: str


class _Notified(types.NotificationParams):
    """A notification's params, every field kept."""

    model_config = ConfigDict(extra="allow")


class Heard:
    """What listen streams carried to one client: their acknowledgements and ``notifications/tasks`` (as dicts,
    ``_meta`` left out)."""

    def __init__(self) -> None:
        self.acks: list[dict[str, Any]] = []
        self.tasks: list[dict[str, Any]] = []

    async def __call__(self, message: Any) -> None:  # the client's message handler
        if isinstance(message, types.SubscriptionsAcknowledgedNotification):
            self.acks.append(message.params.notifications.model_dump(by_alias=True, exclude_none=True))

    async def task(self, params: _Notified) -> None:
        self.tasks.append(params.model_dump(by_alias=True, mode="json", exclude={"meta"}))

    async def until(self, done: Callable[[Heard], bool], seconds: float = 10) -> None:
        with anyio.fail_after(seconds):
            while not done(self):  # noqa: ASYNC110 - notifications arrive on the client's own task
                await anyio.sleep(0.02)


class TasksClient(ClientExtension):
    """Declares the extension; a claimed task is followed to its end when the plain ``call_tool`` is used, and
    ``notifications/tasks`` reach ``heard`` when one is given."""

    identifier = EXTENSION

    def __init__(self, heard: Heard | None = None) -> None:
        self.heard = heard

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=CreateTaskResult, resolve=_resolve)]

    def notifications(self) -> list[NotificationBinding[Any]]:
        if self.heard is None:
            return []
        return [NotificationBinding(method="notifications/tasks", params_type=_Notified, handler=self.heard.task)]


class ToolApprovalClient(ClientExtension):
    """Declares the tool-approval extension (the SEP-2848 draft): a client that understands approval semantics.
    Its tasks are the tasks extension's, so it goes beside ``TasksClient``."""

    identifier = TOOL_APPROVAL


async def _resolve(created: CreateTaskResult, context: ClaimContext) -> types.CallToolResult:
    done = await _follow(context.session, created.task_id)
    return types.CallToolResult.model_validate(done.get("result") or {"content": [], "isError": True})


class _TaskParams(types.RequestParams):
    task_id: str = Field(alias="taskId")
    input_responses: dict[str, Any] | None = Field(None, alias="inputResponses")


def _request(method: str, task_id: str, responses: dict[str, Any] | None = None) -> Any:
    class TaskRequest(types.Request[_TaskParams, Any]):
        params: _TaskParams

    return TaskRequest(method=method, params=_TaskParams(taskId=task_id, inputResponses=responses))


async def call(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any] | types.CallToolResult:
    """One ``tools/call``: the CreateTaskResult (as a dict) if the server answered with a task, else its result."""
    answered = await client.session.call_tool(tool, arguments, allow_claimed=True, allow_input_required=False)
    if isinstance(answered, CreateTaskResult):
        return answered.model_dump(by_alias=True, mode="json", exclude_none=True)
    assert isinstance(answered, types.CallToolResult), answered
    return answered


async def get(client: Client, task_id: str, *, meta: bool = False) -> dict[str, Any]:
    """``tasks/get`` (with its ``_meta`` when ``meta``)."""
    return await _send(client.session, _request("tasks/get", task_id), meta=meta)


async def update(client: Client, task_id: str, responses: dict[str, Any]) -> dict[str, Any]:
    """``tasks/update`` with input responses."""
    return await _send(client.session, _request("tasks/update", task_id, responses))


async def cancel(client: Client, task_id: str) -> dict[str, Any]:
    """``tasks/cancel``."""
    return await _send(client.session, _request("tasks/cancel", task_id))


async def _send(session: Any, request: Any, *, meta: bool = False) -> dict[str, Any]:
    answer = await session.send_request(request, _Answer)
    dumped = answer.model_dump(by_alias=True, mode="json")
    return {key: value for key, value in dumped.items() if meta or key != "_meta"}


async def _follow(
    session: Any, task_id: str, seconds: float = 60, done: Callable[[dict[str, Any]], bool] | None = None
) -> dict[str, Any]:
    with anyio.fail_after(seconds):
        while True:
            found = await _send(session, _request("tasks/get", task_id))
            if found["status"] in TERMINAL if done is None else done(found):
                return dict(found)
            await anyio.sleep(found.get("pollIntervalMs", 500) / 1000)


async def resolved(client: Client, task_id: str, seconds: float = 60) -> dict[str, Any]:
    """``tasks/get`` until the task ends; its last answer."""
    return await _follow(client.session, task_id, seconds)


async def seen(
    client: Client, task_id: str, done: Callable[[dict[str, Any]], bool], seconds: float = 30
) -> dict[str, Any]:
    """``tasks/get`` until ``done`` holds for its answer; that answer."""
    return await _follow(client.session, task_id, seconds, done)


class Listen:
    """One ``subscriptions/listen`` request held open: ``ended`` once the server closed it (its result, or the
    error it was refused with)."""

    def __init__(self) -> None:
        self.ended = anyio.Event()
        self.result: dict[str, Any] | None = None
        self.error: MCPError | None = None


@asynccontextmanager
async def listening(
    client: Client, task_ids: list[str] | str | None = None, *, tools: bool = False
) -> AsyncIterator[Listen]:
    """A listen stream for ``task_ids`` (the extension's ``taskIds``; a string, to see it refused) and/or
    ``toolsListChanged``, open while the block runs (closed by the client at its end if the server has not)."""
    wanted: dict[str, Any] = {"toolsListChanged": True} if tools else {}
    if task_ids is not None:
        wanted["taskIds"] = task_ids
    request = types.SubscriptionsListenRequest(
        params=types.SubscriptionsListenRequestParams(notifications=types.SubscriptionFilter.model_validate(wanted))
    )
    held = Listen()

    async def hold() -> None:
        try:
            held.result = await _send(client.session, request)
        except MCPError as err:
            held.error = err
        held.ended.set()

    async with anyio.create_task_group() as group:
        group.start_soon(hold)
        yield held
        group.cancel_scope.cancel()
