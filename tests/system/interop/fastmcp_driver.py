"""A real fastmcp client, driven one command at a time by tests/system/interop/test_interop.py, as driver.mjs is.

fastmcp 4 (PyPI) with fastmcp-tasks, whose import registers its tasks-extension client on every fastmcp ``Client``
(``io.modelcontextprotocol/tasks`` declared on each 2026-07-28 request, ``tasks/get`` polled for a task, a task's
input asked through the client's elicitation handler). fastmcp pins its own ``mcp``, so this runs in its own
virtualenv, never the project's (.ci/setup-fastmcp.sh makes it from fastmcp-requirements.txt):

    tests/system/interop/.venv-fastmcp/bin/python tests/system/interop/fastmcp_driver.py URL [--tool-approval]

``--tool-approval`` declares the tool-approval extension (``io.modelcontextprotocol/tool-approval``, a draft) beside
the tasks extension, as a client extension of mcp 2.3 that fastmcp's ``Client(extensions=...)`` takes. Every
tools/call and tasks/* answer the server sent as JSON is kept in the command's wire (``answer``, ``_meta`` included),
which holds every request since the previous answer (a task's polls between two commands too).

The line protocol and the replies are driver.mjs's, for the ops the tasks test sends: info, taskCall, taskInput,
taskSettle, taskCancel, close. A url elicitation is accepted without being opened: the test's browser opens it.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable
from typing import Any

import fastmcp_tasks  # noqa: F401  (its import turns the tasks extension client on)
import httpx2
from fastmcp import Client
from fastmcp.client.elicitation import ElicitResult
from fastmcp.client.transports import StreamableHttpTransport
from fastmcp_tasks import ToolTask
from fastmcp_tasks.client_models import ClientCreateTaskResult
from mcp.client.extension import ClientExtension

EXTENSIONS_META = "io.modelcontextprotocol/clientCapabilities"


class ToolApproval(ClientExtension):
    """Declares the tool-approval extension: a client that understands approval semantics."""

    identifier = "io.modelcontextprotocol/tool-approval"


wire: list[dict[str, Any]] = []
sent: dict[int, dict[str, Any]] = {}  # id(request) -> its wire entry, for the response's status
inputs: list[dict[str, Any]] = []
asked = asyncio.Event()
tasks: dict[str, tuple[ToolTask, asyncio.Task[Any], list[str]]] = {}


def summarise(message: dict[str, Any]) -> dict[str, Any]:
    """What driver.mjs records of one JSON-RPC message."""
    if "method" not in message:
        return {"kind": "error-response" if "error" in message else "response"}
    params = message.get("params") or {}
    extensions = ((params.get("_meta") or {}).get(EXTENSIONS_META) or {}).get("extensions")
    summary: dict[str, Any] = {"kind": "request" if "id" in message else "notification", "method": message["method"]}
    for key in ("name", "taskId"):
        if key in params:
            summary[key] = params[key]
    if "inputResponses" in params:
        summary["inputResponses"] = list(params["inputResponses"])
    if extensions is not None:
        summary["extensions"] = list(extensions)
    return summary


async def on_request(request: httpx2.Request) -> None:
    entry: dict[str, Any] = {
        "http": request.method,
        "protocolVersion": request.headers.get("mcp-protocol-version"),
        "mcpMethod": request.headers.get("mcp-method"),
        "mcpName": request.headers.get("mcp-name"),
        "session": "mcp-session-id" in request.headers,
        "messages": [],
    }
    if request.content:
        body = json.loads(request.content)
        entry["messages"] = [summarise(message) for message in (body if isinstance(body, list) else [body])]
    wire.append(entry)
    sent[id(request)] = entry


async def on_response(response: httpx2.Response) -> None:
    entry = sent.pop(id(response.request), None)
    if entry is None:
        return
    entry["status"] = response.status_code
    method = entry["mcpMethod"] or ""
    if not (method == "tools/call" or method.startswith("tasks/")):
        return
    if not response.headers.get("content-type", "").startswith("application/json"):
        return
    answer = json.loads(await response.aread())  # answers come as JSON on this wire
    entry["answer"] = answer.get("result", {"error": answer.get("error")})
    # The status of every tasks/get answer, as the client received it.
    if method == "tasks/get":
        task = tasks.get(str(answer.get("result", {}).get("taskId")))
        if task is not None:
            task[2].append(answer["result"]["status"])


def http_client(**options: Any) -> httpx2.AsyncClient:
    """fastmcp's own HTTP client options, plus hooks that record the wire."""
    hooks: dict[str, list[Callable[..., Any]]] = {"request": [on_request], "response": [on_response]}
    return httpx2.AsyncClient(**{"timeout": 60, **options}, event_hooks=hooks)


async def on_elicit(message: str, response_type: Any, params: Any, context: Any) -> ElicitResult[Any]:
    """A task's input: recorded; a url elicitation accepted (the user agrees to open the link)."""
    request_id = str(context.request_id)  # fastmcp-tasks names a task's input "task-<taskId>-<input key>"
    task_id = next((task_id for task_id in tasks if request_id.startswith(f"task-{task_id}-")), None)
    input_id = request_id.removeprefix(f"task-{task_id}-") if task_id else None
    dumped = params.model_dump(by_alias=True, mode="json", exclude_none=True)
    inputs.append({"kind": "elicitation", "params": dumped, "taskId": task_id, "inputId": input_id})
    asked.set()
    return ElicitResult(action="accept")


async def task_call(client: Client[Any], command: dict[str, Any]) -> dict[str, Any]:
    """One tools/call: a task's id (followed in the background), or the result answered at once."""
    answered = await client.session.call_tool(command["name"], command.get("arguments") or {}, allow_claimed=True)
    if not isinstance(answered, ClientCreateTaskResult):
        result = answered.model_dump(by_alias=True, mode="json", exclude_none=True)
        return {"kind": "immediate", "outcome": {"status": "completed", "result": result}}
    task = ToolTask(client, command["name"], answered, raise_on_error=False)
    tasks[task.task_id] = (task, asyncio.create_task(task.result()), [answered.status])
    return {"kind": "task", "taskId": task.task_id}


async def task_input(command: dict[str, Any]) -> dict[str, Any]:
    while not [each for each in inputs if each["taskId"] == command["taskId"]]:
        asked.clear()
        await asked.wait()
    return {"inputs": [each for each in inputs if each["taskId"] == command["taskId"]]}


async def task_settle(command: dict[str, Any]) -> dict[str, Any]:
    task, driven, statuses = tasks[command["taskId"]]
    await driven
    final = await task.status()  # the terminal task, as tasks/get shows it
    outcome: dict[str, Any] = {"status": final.status}
    if final.status == "completed":
        outcome["result"] = final.result
    elif final.status == "failed":
        outcome["error"] = final.error
    last = {"status": final.status, "ttlMs": final.ttl_ms, "pollIntervalMs": final.poll_interval_ms}
    return {"outcome": outcome, "statuses": statuses, "lastTask": last}


async def run(client: Client[Any], command: dict[str, Any]) -> dict[str, Any]:
    op = command["op"]
    if op == "info":
        capabilities = client.server_capabilities
        shown = capabilities.model_dump(by_alias=True, mode="json", exclude_none=True) if capabilities else None
        return {"protocolVersion": client.protocol_version, "sessionId": None, "serverCapabilities": shown}
    if op == "taskCall":
        return await task_call(client, command)
    if op == "taskInput":
        return await task_input(command)
    if op == "taskSettle":
        return await task_settle(command)
    if op == "taskCancel":
        await tasks[command["taskId"]][0].cancel()
        return {"cancelled": True}
    if op == "close":
        return {"closed": True}
    raise ValueError(f"unknown op {op}")


def reply(line: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


async def main(url: str, tool_approval: bool) -> None:
    global wire
    transport = StreamableHttpTransport(url, httpx_client_factory=http_client)
    extensions = [ToolApproval()] if tool_approval else None
    async with Client(transport, mode="auto", elicitation_handler=on_elicit, extensions=extensions) as client:
        reply({"ready": True, "kind": "fastmcp", "connectWire": wire})
        wire = []
        loop = asyncio.get_running_loop()
        while line := await loop.run_in_executor(None, sys.stdin.readline):
            if not line.strip():
                continue
            command = json.loads(line)
            try:
                answer = await run(client, command)
            except Exception as err:  # reported to the test, like driver.mjs's describeError
                answer = {
                    "error": {"code": getattr(err, "code", None), "message": str(err), "type": type(err).__name__}
                }
            reply({"op": command["op"], **answer, "prompts": [], "wire": wire})
            wire = []  # the next command's wire starts here: what is sent before it (a task's polls) is in it too
            if command["op"] == "close":
                break
        for _, driven, _ in tasks.values():
            driven.cancel()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], "--tool-approval" in sys.argv[2:]))
