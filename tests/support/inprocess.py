"""A profile's backend server inside the test process, reached through the SDK's in-memory transport.

The gateway's real backend client (gateway.backend.client.McpBackend) is used unchanged: only the opener
differs, so liveness tracking, reconnects and answer handling are the ones that ship. The server is the same
code that runs as a child process, built from the very command line the config names (``-m MODULE --stdio
--db PATH ...``), and it writes the same real SQLite file the tests assert on. Faults that end the process
(``drop-after-write``) belong to the system tests, which run the backend as a real process. ``gateway_over``
runs a gateway over a server a test writes itself (one that answers past the limits, or publishes hostile schemas).
"""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from mcp import Client
from mcp.server import Server

from gateway.backend.client import Opener
from gateway.config import BackendSection, GatewayConfig, parse_config
from gateway.runtime import Gateway, open_gateway

SERVERS = {
    "legacy_backend": "legacy_backend.cli",
    "legacy_backend.flags": "legacy_backend.flags",
    "tests.db_backend": "tests.db_backend.__main__",
}
"""Where each backend module's ``server_for(argv)`` lives."""


def in_process(config: GatewayConfig) -> dict[str, Opener]:
    """Openers that serve each of the config's stdio backends (``python -m MODULE --stdio ...``) in this process."""
    return {name: opener_for(section) for name, section in config.backend_sections().items()}


def opener_for(section: BackendSection) -> Opener:
    """An opener that serves one stdio backend section's server in this process."""
    args = list(section.args)
    if section.transport != "stdio" or args[:1] != ["-m"] or args[1] not in SERVERS:
        raise ValueError(f"not a backend this test process can run: {args}")
    server: Any = importlib.import_module(SERVERS[args[1]]).server_for(args[2:])

    def open_client() -> AbstractAsyncContextManager[Client]:
        return Client(server, mode="legacy")

    return open_client


@asynccontextmanager
async def gateway_over(server: Server[Any], data: dict[str, Any]) -> AsyncIterator[Gateway]:
    """A gateway (config ``data``) whose one backend is ``server``, a low-level SDK server written by the test,
    reached in memory as a 2025-11-25 client reaches it."""

    def opener() -> AbstractAsyncContextManager[Client]:
        return Client(server, mode="legacy")

    async with open_gateway(parse_config(data), opener=opener) as running:
        yield running
