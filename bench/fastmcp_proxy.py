"""FastMCP's proxy as a peer for bench/run: the backend over stdio, served as streamable HTTP, nothing else.

Runs in bench/.venv-fastmcp (bench/run makes it; fastmcp pins its own mcp, which must not replace the project's):

    bench/.venv-fastmcp/bin/python bench/fastmcp_proxy.py HOST PORT -- COMMAND [ARG ...]

``create_proxy`` is fastmcp's recommended proxy; the backend's era is pinned to 2025-11-25 sessions (the legacy
backend's) and the front answers whatever the client speaks, as mcp-proxy's does.
"""

from __future__ import annotations

import sys

from fastmcp.client.transports import StdioTransport
from fastmcp.server import create_proxy


def main(argv: list[str]) -> None:
    host, port, separator, command, *args = argv
    if separator != "--":
        raise SystemExit("usage: fastmcp_proxy.py HOST PORT -- COMMAND [ARG ...]")
    proxy = create_proxy(StdioTransport(command=command, args=args), name="fastmcp-proxy")
    proxy.run(transport="http", host=host, port=int(port), log_level="warning", show_banner=False)


if __name__ == "__main__":
    main(sys.argv[1:])
