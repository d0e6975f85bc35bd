"""The legacy MCP server: one untyped, unannotated god-tool `manage_tenant` over the SQLite store."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sqlite3
import sys
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, NoReturn

from mcp.server.mcpserver import MCPServer
from mcp_types import CallToolResult, TextContent
from pydantic import Field

from legacy_backend.faults import (
    DEEP_AFTER_WRITE,
    DROP_AFTER_WRITE,
    HUGE_AFTER_WRITE,
    MALFORMED_AFTER_WRITE,
    STRING_VERSION_AFTER_WRITE,
    Faults,
)
from legacy_backend.store import JSONObject, Store, StoreError

logger = logging.getLogger("legacy_backend")

TOOL_NAME = "manage_tenant"
TOOL_DESCRIPTION = (
    "Manage QA tenants. action: list | get | fixtures | reseed | wipe | create. "
    "payload: get/wipe {id}; reseed {id, fixture}; create {id, name, protected?}."
)
STORAGE_UNAVAILABLE = "Internal error: storage unavailable"

READ_ACTIONS = ("list", "get", "fixtures")
WRITE_ACTIONS = ("reseed", "wipe", "create")
ACTIONS = tuple(sorted(READ_ACTIONS + WRITE_ACTIONS))


class RequestError(Exception):
    """A refused request; the message is returned to the caller as an isError result."""


def _text(text: str, *, is_error: bool = False) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=is_error)


def _dump(obj: JSONObject) -> str:
    return json.dumps(obj, separators=(",", ":"))


def _malformed(obj: JSONObject) -> str:
    """A truncated JSON document: every proper prefix of an object's text is invalid JSON."""
    text = _dump(obj)
    return text[: max(1, len(text) // 2)]


def _deep(obj: JSONObject, levels: int) -> str:
    """The result wrapped in ``levels`` nested arrays: valid JSON that a recursive parser cannot read."""
    return "[" * levels + _dump(obj) + "]" * levels


def _huge(obj: JSONObject, size: int) -> str:
    """The result padded with a filler string until its text is ``size`` bytes long: valid, and too big."""
    text = _dump({**obj, "padding": ""})
    return text[:-2] + "x" * max(0, size - len(text)) + '"}'


def _answer_after_write(fired: str | None, result: JSONObject, faults: Faults) -> str:
    """The text a write answers with, as a fault that fired after the commit shapes it."""
    if fired == MALFORMED_AFTER_WRITE:
        return _malformed(result)
    if fired == DEEP_AFTER_WRITE:
        return _deep(result, faults.value(DEEP_AFTER_WRITE))
    if fired == HUGE_AFTER_WRITE:
        return _huge(result, faults.value(HUGE_AFTER_WRITE))
    if fired == STRING_VERSION_AFTER_WRITE:
        return _dump({**result, "version": str(result.get("version"))})
    return _dump(result)


def _require_str(payload: JSONObject, field: str, action: str) -> str:
    if field not in payload:
        raise RequestError(f"Missing required field '{field}' in payload for action '{action}'")
    value = payload[field]
    if not isinstance(value, str):
        raise RequestError(f"Field '{field}' must be a string")
    if not value:
        raise RequestError(f"Field '{field}' must not be empty")
    return value


def _optional_bool(payload: JSONObject, field: str) -> bool:
    value = payload.get(field, False)
    if not isinstance(value, bool):
        raise RequestError(f"Field '{field}' must be a boolean")
    return value


def _drop_connection(action: str) -> NoReturn:
    """Emulate a dropped connection: the write is committed, the answer never leaves."""
    logger.warning("fault %s fired after %s: exiting without answering", DROP_AFTER_WRITE, action)
    logging.shutdown()
    sys.stderr.flush()
    os._exit(1)


class TenantService:
    """Dispatches `manage_tenant` actions to the store and applies the fault switches."""

    def __init__(self, store: Store, faults: Faults) -> None:
        """Bind the service to its store and fault switches."""
        self._store = store
        self._faults = faults

    async def handle(self, action: str, payload: JSONObject) -> CallToolResult:
        """Run one action and render its result (or refusal) as a single text block."""
        try:
            if action in READ_ACTIONS:
                return _text(_dump(self._read(action, payload)))
            if action in WRITE_ACTIONS:
                return await self._write(action, payload)
            raise RequestError(f"Unknown action '{action}'. Valid actions: {', '.join(ACTIONS)}")
        except (RequestError, StoreError) as exc:
            logger.info("%s refused: %s", action, exc)
            return _text(str(exc), is_error=True)
        except sqlite3.Error as exc:
            logger.error("%s failed in storage: %r", action, exc)
            return _text(STORAGE_UNAVAILABLE, is_error=True)

    def _read(self, action: str, payload: JSONObject) -> JSONObject:
        if action == "list":
            return {"tenants": self._store.list_tenants()}
        if action == "fixtures":
            return {"fixtures": self._store.fixtures()}
        return self._store.get_tenant(_require_str(payload, "id", action))

    def _write_op(self, action: str, payload: JSONObject) -> Callable[[], JSONObject]:
        """Validate the payload (no storage access) and return the write to run in a transaction."""
        tenant_id = _require_str(payload, "id", action)
        if action == "reseed":
            fixture = _require_str(payload, "fixture", action)
            return lambda: self._store.reseed(tenant_id, fixture)
        if action == "wipe":
            return lambda: self._store.wipe(tenant_id)
        name = _require_str(payload, "name", action)
        protected = _optional_bool(payload, "protected")
        return lambda: self._store.create(tenant_id, name, protected)

    async def _write(self, action: str, payload: JSONObject) -> CallToolResult:
        op = self._write_op(action, payload)
        delay = self._faults.latency_seconds()
        if delay > 0:
            logger.info("fault latency fired: sleeping %.3fs before %s", delay, action)
            await asyncio.sleep(delay)
        if self._faults.fail_before_write():
            logger.info("fault fail-before-write fired on %s", action)
            return _text(STORAGE_UNAVAILABLE, is_error=True)
        with self._store.transaction():
            result = op()
            fired = self._faults.after_write()
        if fired == DROP_AFTER_WRITE:
            _drop_connection(action)
        if fired is not None:
            logger.info("fault %s fired after %s", fired, action)
        return _text(_answer_after_write(fired, result, self._faults))


def _tool(service: TenantService) -> Callable[..., Awaitable[CallToolResult]]:
    async def manage_tenant(
        action: str,
        payload: Annotated[dict[str, Any], Field(default_factory=dict, json_schema_extra={"default": {}})],
    ) -> CallToolResult:
        return await service.handle(action, payload)

    manage_tenant.__doc__ = TOOL_DESCRIPTION
    return manage_tenant


def build_server(store: Store, faults: Faults) -> MCPServer:
    """The MCPServer exposing `manage_tenant` with no annotations and no outputSchema."""
    server: MCPServer = MCPServer("legacy-tenant-admin", version="0.9.3")
    server.add_tool(
        _tool(TenantService(store, faults)),
        name=TOOL_NAME,
        description=TOOL_DESCRIPTION,
        structured_output=False,
    )
    return server
