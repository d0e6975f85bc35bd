"""An ASGI app served over real HTTP on a loopback port, inside the test process (a webhook receiver, an
identity provider's JWKS, an OTLP receiver, a backend whose requests are recorded): started before the block,
stopped after it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Literal

import anyio
import uvicorn


@asynccontextmanager
async def serve_asgi(app: Any, port: int, lifespan: Literal["on", "off"] = "off") -> AsyncIterator[None]:
    """Serve ``app`` on 127.0.0.1:``port`` until the block ends (``lifespan="on"`` for an app that needs its own,
    like an MCP server's streamable-HTTP app)."""
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan=lifespan))
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(server.serve)
        with anyio.fail_after(30):
            while not server.started:  # noqa: ASYNC110 - uvicorn exposes a flag, not an event
                await anyio.sleep(0.02)
        yield
        server.should_exit = True
