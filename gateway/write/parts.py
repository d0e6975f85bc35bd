"""What the write pipeline uses of a running gateway, as one narrow interface.

``gateway.runtime.Gateway`` is the implementation; naming only these parts here keeps the write package below
the runtime that assembles it (the runtime imports ``gateway.write.unsettled``, never the other way round).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from gateway.approvals.notify import Notifier
from gateway.audit.floods import RefusalCounter
from gateway.backend import Backend
from gateway.backend.reads import TargetReader
from gateway.catalog.published import PublishedTool
from gateway.config import GatewayConfig
from gateway.observability.metrics import Metrics
from gateway.stores import Store
from gateway.write.unsettled import Unsettled


class Parts(Protocol):
    """The running gateway's parts a write needs: config, store, clock, backends, metrics and its outcome queue."""

    @property
    def config(self) -> GatewayConfig: ...
    @property
    def store(self) -> Store: ...
    @property
    def clock(self) -> Callable[[], float]: ...
    @property
    def sleep(self) -> Callable[[float], Awaitable[None]]: ...
    @property
    def metrics(self) -> Metrics: ...
    @property
    def unsettled(self) -> Unsettled: ...
    @property
    def refusals(self) -> RefusalCounter: ...
    @property
    def notifier(self) -> Notifier | None: ...
    @property
    def keys(self) -> list[bytes]: ...

    def backend_for(self, tool: str) -> Backend:
        """The backend that serves a tool."""
        ...

    def reader_for(self, tool: str) -> TargetReader:
        """The reads of the backend that serves a tool."""
        ...

    async def fresh_lookup(self, name: str) -> dict[str, Any]:
        """A lookup table as its backend has it now."""
        ...

    async def tool(self, name: str) -> PublishedTool:
        """One configured tool as published now (a ToolError when its backend is down)."""
        ...

    @property
    def approvals_url(self) -> str | None:
        """The base of approval links."""
        ...
