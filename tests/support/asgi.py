"""An ASGI app served over real HTTP on a loopback port, inside the test process (a webhook receiver, an
identity provider's JWKS): started before the block, stopped after it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import uvicorn


@asynccontextmanager
async def serve_asgi(app: Any, port: int) -> AsyncIterator[None]:
    """Serve ``app`` on 127.0.0.1:``port`` until the block ends."""
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off"))
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(server.serve)
        with anyio.fail_after(30):
            while not server.started:  # noqa: ASYNC110 - uvicorn exposes a flag, not an event
                await anyio.sleep(0.02)
        yield
        server.should_exit = True
