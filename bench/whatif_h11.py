"""What-if, for the bench only: ``mcp-safety-gateway serve`` on mcp-proxy's HTTP stack: uvicorn's pure-Python
HTTP parser (h11) and asyncio's own event loop.

The gateway depends on ``httptools``, which uvicorn picks when it is installed, and serves on ``uvloop``;
``mcp-proxy``'s own install brings neither, so mcp-proxy parses HTTP with h11 on asyncio's loop. This launcher
puts the gateway on that stack so the bench can show how much of the difference between the two is the parser
and the loop, and how much is everything else.
"""

from __future__ import annotations

import sys
from typing import Any

import uvicorn

from gateway.cli import serve

_original = uvicorn.Config.__init__


def _with_h11(self: uvicorn.Config, *args: Any, **kwargs: Any) -> None:
    kwargs["http"] = "h11"
    _original(self, *args, **kwargs)


def _on_asyncio(serving: Any, *args: Any) -> None:
    import anyio

    anyio.run(serving, *args)


uvicorn.Config.__init__ = _with_h11  # type: ignore[method-assign]
serve.run_serving = _on_asyncio

if __name__ == "__main__":
    from gateway.cli.main import main

    sys.exit(main(sys.argv[1:]))
