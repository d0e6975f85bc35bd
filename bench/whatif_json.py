"""What-if, for the bench only: ``mcp-safety-gateway serve`` answering each POST with one JSON body, not SSE.

The gateway serves stateful streamable HTTP with an SSE stream per POST (``json_response=False`` in
gateway/http_app.py), because a 2025-11-25 client can only be asked to confirm a write over that stream. This
launcher flips that one argument so the bench can show what the SSE framing costs on the read path. With it,
2025-era clients get ``confirmation_unavailable`` on writes: it is a measurement, not a mode to deploy.
"""

from __future__ import annotations

import sys
from typing import Any

from mcp.server.lowlevel.server import Server

_original = Server.streamable_http_app


def _json_app(self: Server[Any], *args: Any, **kwargs: Any) -> Any:
    kwargs["json_response"] = True
    return _original(self, *args, **kwargs)


Server.streamable_http_app = _json_app  # type: ignore[method-assign]

if __name__ == "__main__":
    from gateway.cli import main

    sys.exit(main(sys.argv[1:]))
