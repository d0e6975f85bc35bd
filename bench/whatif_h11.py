"""What-if, for the bench only: ``mcp-safety-gateway serve`` with uvicorn's pure-Python HTTP parser (h11).

The gateway depends on ``httptools``, which uvicorn picks when it is installed; ``mcp-proxy``'s own install does
not bring it, so mcp-proxy parses HTTP with h11. This launcher forces h11 in the gateway so the bench can show
how much of the difference between the two is the HTTP parser and how much is everything else.
"""

from __future__ import annotations

import sys
from typing import Any

import uvicorn

_original = uvicorn.Config.__init__


def _with_h11(self: uvicorn.Config, *args: Any, **kwargs: Any) -> None:
    kwargs["http"] = "h11"
    _original(self, *args, **kwargs)


uvicorn.Config.__init__ = _with_h11  # type: ignore[method-assign]

if __name__ == "__main__":
    from gateway.cli.main import main

    sys.exit(main(sys.argv[1:]))
