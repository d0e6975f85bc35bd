"""Command line: `legacy-backend (--stdio | --http HOST:PORT) --db PATH [--seed-demo] [--fault SPEC] ...`."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

import anyio
from mcp.server.mcpserver import MCPServer

from legacy_backend.faults import ENV_VAR, FAULT_NAMES, Faults, parse_fault_specs, specs_from_env
from legacy_backend.server import build_server
from legacy_backend.store import Store

logger = logging.getLogger("legacy_backend")

MCP_PATH = "/mcp"


def _host_port(text: str) -> tuple[str, int]:
    host, sep, port_text = text.rpartition(":")
    if not sep or not host or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host.strip("[]"), int(port_text)


def _count(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}")
    return int(text)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser."""
    parser = argparse.ArgumentParser(
        prog="legacy-backend",
        description="A deliberately unsafe legacy MCP server exposing one god-tool, manage_tenant.",
    )
    transport = parser.add_mutually_exclusive_group(required=True)
    transport.add_argument("--stdio", action="store_true", help="serve MCP over stdin/stdout")
    transport.add_argument(
        "--http",
        metavar="HOST:PORT",
        type=_host_port,
        help=f"serve streamable HTTP at http://HOST:PORT{MCP_PATH}",
    )
    parser.add_argument("--db", metavar="PATH", type=Path, required=True, help="SQLite file, created if missing")
    parser.add_argument("--seed-demo", action="store_true", help="add the demo tenants if there are none")
    parser.add_argument(
        "--seed-tenants", metavar="N", type=_count, default=0, help="add N bulk tenants if there are none"
    )
    parser.add_argument(
        "--ids-ignore-case",
        action="store_true",
        help="match tenant ids whatever their case, answering with the stored id (as many real servers do)",
    )
    parser.add_argument(
        "--fault",
        metavar="SPEC",
        action="append",
        default=[],
        help=f"NAME[=VALUE][:N], repeatable, also read from ${ENV_VAR}; names: {', '.join(FAULT_NAMES)}. "
        "After the write commits: drop-after-write exits unanswered, malformed-after-write truncates the answer, "
        "deep-after-write[=LEVELS] nests it LEVELS arrays deep (default 100000), huge-after-write=BYTES pads it "
        "to BYTES, string-version-after-write reports the version as a string. Before it: latency=MS, "
        "fail-before-write.",
    )
    parser.add_argument(
        "--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"], help="stderr log level"
    )
    return parser


def _configure_logging(level: str) -> None:
    """Send every log record to stderr (stdout carries the protocol in stdio mode)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s legacy-backend %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    if level != "DEBUG":
        # The SDK logs every stateless HTTP request at INFO; keep its warnings and errors only.
        logging.getLogger("mcp").setLevel(logging.WARNING)


async def _serve_http(server: MCPServer, host: str, port: int) -> None:
    import uvicorn

    app = server.streamable_http_app(streamable_http_path=MCP_PATH, stateless_http=True, json_response=True, host=host)
    config = uvicorn.Config(app, host=host, port=port, log_config=None, log_level="warning", access_log=False)
    logger.info("serving streamable HTTP on http://%s:%d%s", host, port, MCP_PATH)
    await uvicorn.Server(config).serve()


def server_for(argv: Sequence[str]) -> MCPServer:
    """The server a command line describes, opened and seeded but not running (tests run it in process)."""
    args = build_parser().parse_args(argv)
    store = Store(args.db, ids_ignore_case=args.ids_ignore_case)
    store.seed(demo=args.seed_demo, bulk_tenants=args.seed_tenants)
    return build_server(store, Faults(parse_fault_specs([*specs_from_env(), *args.fault]), store))


def main(argv: Sequence[str] | None = None) -> int:
    """Parse arguments, open and seed the database, and serve until the transport closes."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        specs = parse_fault_specs([*specs_from_env(), *args.fault])
    except ValueError as exc:
        parser.error(str(exc))
    _configure_logging(args.log_level)

    store = Store(args.db, ids_ignore_case=args.ids_ignore_case)
    try:
        added = store.seed(demo=args.seed_demo, bulk_tenants=args.seed_tenants)
        if added:
            logger.info("seeded %d tenants into %s", added, args.db)
        if specs:
            armed = ", ".join(f"{s.name}={s.value}:{s.limit}" for s in specs.values())
            logger.info("faults armed (name=value:limit): %s", armed)
        server = build_server(store, Faults(specs, store))
        if args.http is not None:
            host, port = args.http
            anyio.run(_serve_http, server, host, port)
        else:
            anyio.run(server.run_stdio_async)
    except KeyboardInterrupt:
        return 130
    finally:
        store.close()
    return 0
