"""A profile's backend server inside the test process, reached through the SDK's in-memory transport.

The gateway's real backend client (gateway.backend.client.McpBackend) is used unchanged: only the opener
differs, so liveness tracking, reconnects and answer handling are the ones that ship. The server is the same
code that runs as a child process, built from the very command line the config names (``-m MODULE --stdio
--db PATH ...``), and it writes the same real SQLite file the tests assert on. Faults that end the process
(``drop-after-write``) belong to the system tests, which run the backend as a real process.
"""

from __future__ import annotations

import importlib
from contextlib import AbstractAsyncContextManager
from typing import Any

from mcp import Client

from gateway.backend.client import Opener
from gateway.config import GatewayConfig

SERVERS = {"legacy_backend": "legacy_backend.cli", "legacy_backend.flags": "legacy_backend.flags"}
"""Where each backend module's ``server_for(argv)`` lives."""


def in_process(config: GatewayConfig) -> Opener:
    """An opener that serves the config's stdio backend (``python -m MODULE --stdio ...``) in this process."""
    args = list(config.backend.args)
    if config.backend.transport != "stdio" or args[:1] != ["-m"] or args[1] not in SERVERS:
        raise ValueError(f"not a backend this test process can run: {args}")
    server: Any = importlib.import_module(SERVERS[args[1]]).server_for(args[2:])

    def open_client() -> AbstractAsyncContextManager[Client]:
        return Client(server, mode="legacy")

    return open_client
