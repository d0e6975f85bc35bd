"""Reads of the legacy backend — targets, lists, lookups — translated into data or coded errors."""

from __future__ import annotations

import fnmatch
import logging
from typing import Any

from gateway.backend import Backend, BackendUnavailable, Reply
from gateway.config import Call, Lookup, Target
from gateway.errors import ToolError
from gateway.templates import MISSING, at_path, render

log = logging.getLogger(__name__)


class TargetReader:
    """The backend's read actions, each answering with data or a ToolError."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self._lookups: dict[str, dict[str, Any]] = {}

    async def get(self, target: Target, target_id: str) -> dict[str, Any]:
        """The target's current state; tenant_not_found when the backend has none by that id."""
        call = target.get
        reply = await self._read(call, render(call.payload, {"target_id": target_id}))
        if reply.is_error and target.not_found_text in reply.text:
            raise ToolError("tenant_not_found", f"No {target.noun} {target_id}. List them to see which exist.")
        state = at_path(_ok(reply, call.action), call.path)
        if not isinstance(state, dict) or version_of(target, state) is MISSING:
            raise _malformed(call.action)
        return state

    async def find(self, target: Target, target_id: str) -> dict[str, Any] | None:
        """The target's current state, or None when it cannot be read for any reason."""
        try:
            return await self.get(target, target_id)
        except ToolError:
            return None

    async def items(self, call: Call) -> list[Any]:
        """Every item of an unbounded list action."""
        items = at_path(_ok(await self._read(call, render(call.payload, {})), call.action), call.path)
        if not isinstance(items, list):
            raise _malformed(call.action)
        return items

    async def lookup(self, name: str, lookup: Lookup) -> dict[str, Any]:
        """A lookup table, read once and kept."""
        if lookup.values is not None:
            return lookup.values
        if name not in self._lookups:
            assert lookup.call is not None
            call = lookup.call
            table = at_path(_ok(await self._read(call, render(call.payload, {})), call.action), call.path)
            if not isinstance(table, dict):
                raise _malformed(call.action)
            self._lookups[name] = table
        return self._lookups[name]

    async def _read(self, call: Call, payload: dict[str, Any]) -> Reply:
        try:
            return await self.backend.read(call.action, payload, call.timeout_seconds)
        except BackendUnavailable:
            raise ToolError(
                "backend_unavailable", "The backend cannot be reached right now. Nothing was changed; retry later."
            ) from None


def version_of(target: Target, state: dict[str, Any]) -> Any:
    """The target's version (MISSING when the state has none)."""
    version = at_path(state, target.version_field)
    return version if isinstance(version, str | int) and not isinstance(version, bool) else MISSING


def is_protected(target: Target, target_id: str, state: dict[str, Any]) -> bool:
    """Protection is the gateway's job: a flag field, or an id matching a configured glob."""
    if target.protected_field is not None and at_path(state, target.protected_field) is True:
        return True
    return any(fnmatch.fnmatchcase(target_id, pattern) for pattern in target.protected_ids)


def _ok(reply: Reply, action: str) -> Any:
    if reply.is_error:
        log.warning("backend %s answered isError: %.200s", action, reply.text)
        raise ToolError("backend_error", f"The backend refused the {action} request. Nothing was changed.")
    data = reply.json()
    if data is None:
        raise _malformed(action)
    return data


def _malformed(action: str) -> ToolError:
    log.warning("backend %s returned data the gateway does not understand", action)
    return ToolError("backend_error", f"The backend returned a malformed {action} result. Nothing was changed.")
