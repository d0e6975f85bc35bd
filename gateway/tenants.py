"""Reads of the legacy backend, translated into tenants, fixtures and error codes."""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from typing import Any

from gateway.backend import Backend, BackendUnavailable, Reply
from gateway.errors import ToolError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Tenant:
    """One tenant as the backend reports it."""

    id: str
    name: str
    rows: int
    version: int
    protected: bool

    def as_json(self) -> dict[str, Any]:
        """The wire form."""
        return asdict(self)


def parse_tenant(data: Any) -> Tenant | None:
    """A tenant from backend JSON, or None when a field is missing or of the wrong type."""
    if not isinstance(data, dict):
        return None
    fields = {"id": str, "name": str, "rows": int, "version": int, "protected": bool}
    for key, kind in fields.items():
        value = data.get(key)
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            return None
    return Tenant(data["id"], data["name"], data["rows"], data["version"], data["protected"])


class TenantReader:
    """The backend's read actions, each answering with data or a ToolError."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self._fixtures: dict[str, dict[str, int]] = {}

    async def get(self, action: str, tenant_id: str) -> Tenant:
        """The tenant now; tenant_not_found when the backend has none by that id."""
        reply = await self._read(action, {"id": tenant_id})
        if reply.is_error and self.backend.config.not_found_text in reply.text:
            raise ToolError(
                "tenant_not_found",
                f"No tenant {tenant_id}. Call list_tenants to see the tenants that exist.",
                next_tool="list_tenants",
            )
        tenant = parse_tenant(_ok(reply, action))
        if tenant is None or tenant.id != tenant_id:
            raise _malformed(action)
        return tenant

    async def find(self, action: str, tenant_id: str) -> Tenant | None:
        """The tenant now, or None when it cannot be read for any reason."""
        try:
            return await self.get(action, tenant_id)
        except ToolError:
            return None

    async def all(self, action: str, items_key: str) -> list[Tenant]:
        """Every tenant, as the backend's unbounded list returns them."""
        data = _ok(await self._read(action, {}), action)
        items = data.get(items_key) if isinstance(data, dict) else data
        if not isinstance(items, list):
            raise _malformed(action)
        tenants = [parse_tenant(item) for item in items]
        if any(tenant is None for tenant in tenants):
            raise _malformed(action)
        return [tenant for tenant in tenants if tenant is not None]

    async def fixtures(self, action: str) -> dict[str, int]:
        """Fixture name -> row count, read once per action and kept."""
        if action not in self._fixtures:
            data = _ok(await self._read(action, {}), action)
            table = data.get("fixtures", data) if isinstance(data, dict) else None
            if not isinstance(table, dict) or not all(
                isinstance(count, int) and not isinstance(count, bool) for count in table.values()
            ):
                raise _malformed(action)
            self._fixtures[action] = {str(name): int(count) for name, count in table.items()}
        return self._fixtures[action]

    async def _read(self, action: str, payload: dict[str, Any]) -> Reply:
        try:
            return await self.backend.read(action, payload)
        except BackendUnavailable:
            raise ToolError(
                "backend_unavailable",
                "The legacy backend cannot be reached right now. Nothing was changed; retry later.",
            ) from None


def _ok(reply: Reply, action: str) -> Any:
    if reply.is_error:
        log.warning("backend %s answered isError: %.200s", action, reply.text)
        raise ToolError("backend_error", f"The legacy backend refused the {action} request. Nothing was changed.")
    data = reply.json()
    if data is None:
        raise _malformed(action)
    return data


def _malformed(action: str) -> ToolError:
    log.warning("backend %s returned data the gateway does not understand", action)
    return ToolError("backend_error", f"The legacy backend returned a malformed {action} result. Nothing was changed.")
