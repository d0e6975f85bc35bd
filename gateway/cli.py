"""``mcp-safety-gateway``: serve the gateway over HTTP or stdio, check a config, call a tool, read the audit.

Only ``serve`` changes the gateway's state at start (start-up recovery of keys a crash left in flight);
``check``, ``audit`` and ``call`` never do. Each subcommand imports what it needs when it runs, so ``--help``
stays quick.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sys
from datetime import datetime
from typing import TYPE_CHECKING

import anyio

from gateway import logs
from gateway.config import DEFAULT_CONFIG, ConfigError, GatewayConfig, load_config

if TYPE_CHECKING:
    from gateway.runtime import Gateway

DEFAULT_URL = "http://127.0.0.1:8080/mcp"

log = logging.getLogger("gateway")


def main(argv: list[str] | None = None) -> int:
    """Entry point of the console script."""
    parser = argparse.ArgumentParser(prog="mcp-safety-gateway", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the gateway (HTTP on 127.0.0.1:8080/mcp, or --stdio)")
    serve.add_argument("--config", default=str(DEFAULT_CONFIG), help="TOML file (default: %(default)s)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8080)
    serve.add_argument("--stdio", action="store_true", help="speak MCP on stdin/stdout instead of HTTP")
    serve.add_argument("--log-level", choices=["debug", "info", "warning", "error"], help="overrides [logging] level")
    serve.add_argument(
        "--insecure-listen-without-auth",
        action="store_true",
        help="with no [auth] verifier, still start when others could reach the gateway: a non-loopback --host, "
        "[http] settings that admit other hosts or origins, requests relayed by a proxy (anyone who can reach it "
        "can write)",
    )
    check = commands.add_parser("check", help="validate a config against its backend and print the tools")
    check.add_argument("--config", default=str(DEFAULT_CONFIG), help="TOML file (default: %(default)s)")
    check.add_argument("--schemas", action="store_true", help="also print every input and output schema")
    check.add_argument(
        "--explain",
        nargs="+",
        metavar="WORD",
        help="WRITE_TOOL TARGET [key=value ...]: which approval rule a plan for that target would hit",
    )
    call = commands.add_parser("call", help="call one tool on a running gateway and answer its prompts here")
    call.add_argument("tool")
    call.add_argument("arguments", nargs="*", metavar="key=value|key:=json")
    call.add_argument("--url", default=DEFAULT_URL, help="the gateway's MCP endpoint (default: %(default)s)")
    call.add_argument(
        "--token-env", default="GATEWAY_TOKEN", help="env var holding a bearer token (default: %(default)s)"
    )
    call.add_argument("--json", action="store_true", help="print the raw JSON answer")
    audit = commands.add_parser("audit", help="read or verify the audit trail in the configured store")
    audit_commands = audit.add_subparsers(dest="audit_command", required=True)
    listing = audit_commands.add_parser("list", help="the entries, oldest first")
    listing.add_argument("--tenant", help="only this target id")
    listing.add_argument("--caller", help="only this caller")
    listing.add_argument("--since", help="only entries at or after this UTC time (2026-12-02T18:00:00Z)")
    listing.add_argument("--json", action="store_true", help="one JSON object per line")
    verify = audit_commands.add_parser("verify", help="check the hash chain: edits, deletions, reordering")
    for sub in (listing, verify):
        sub.add_argument("--config", default=str(DEFAULT_CONFIG), help="TOML file (default: %(default)s)")
    approvals = commands.add_parser("approvals", help="list, approve or reject writes waiting for approval")
    approvals.add_argument("action", choices=["list", "approve", "reject"])
    approvals.add_argument("ids", nargs="*", metavar="APPROVAL_ID")
    approvals.add_argument(
        "--url", default=DEFAULT_URL.removesuffix("/mcp"), help="the gateway's base URL (default: %(default)s)"
    )
    approvals.add_argument(
        "--token-env",
        default="GATEWAY_APPROVER_TOKEN",
        help="env var holding your approver token (default: %(default)s)",
    )
    approvals.add_argument("--json", action="store_true", help="one JSON object per line")
    args = parser.parse_args(argv)
    if args.command == "approvals":
        from gateway.approvals import remote

        if args.action != "list" and not args.ids:
            parser.error(f"approvals {args.action} needs at least one APPROVAL_ID")
        return remote.run(args.url, args.action, args.ids, args.token_env, args.json)
    if args.command == "call":
        from gateway import terminal

        return terminal.run(args.url, args.tool, args.arguments, args.token_env, args.json)

    try:
        config = load_config(args.config)
    except ConfigError as exc:
        print(f"mcp-safety-gateway: {exc}", file=sys.stderr)
        return 2
    if args.command == "check":
        logs.configure("error", "text")
        return anyio.run(run_check, config, args.schemas, args.explain)
    if args.command == "audit":
        logs.configure("error", "text")
        return anyio.run(run_audit, config, args)
    logs.configure(args.log_level or config.logging.level, config.logging.format)
    if args.stdio:
        refusal = stdio_refusal(config)
        if refusal is not None:
            print(f"mcp-safety-gateway: {refusal}", file=sys.stderr)
            return 2
        anyio.run(serve_stdio, config)
        return 0
    refusal = bind_refusal(args.host, config, args.insecure_listen_without_auth)
    if refusal is not None:
        print(f"mcp-safety-gateway: {refusal}", file=sys.stderr)
        return 2
    anyio.run(serve_http, config, args.host, args.port, args.insecure_listen_without_auth)
    return 0


def bind_refusal(host: str, config: GatewayConfig, insecure: bool) -> str | None:
    """Why an unauthenticated gateway will not start on ``host`` with this config (one line per reason naming
    the flag or key), or None when it may."""
    from gateway.http.edge import exposure

    reasons = exposure(config, host)
    if not reasons:
        return None
    if insecure:
        for reason in reasons:
            log.warning("NO AUTHENTICATION, YET REACHABLE BEYOND THIS MACHINE: %s; anyone can reset tenants", reason)
        return None
    why = "; ".join(reasons)
    return (
        f"refusing to listen on {host}: no authentication is configured ([auth] verifier), so the gateway only "
        f"answers its own machine, but {why}. Configure a verifier, or pass --insecure-listen-without-auth."
    )


def stdio_refusal(config: GatewayConfig) -> str | None:
    """Why the gateway will not serve over stdio with this config, or None."""
    url_tools = [name for name, tool in config.tools.items() if getattr(tool, "confirm", None) == "url"]
    if url_tools and config.approvals.public_url is None:
        return (
            f"tools.{url_tools[0]}.confirm is 'url', and over stdio this process serves no approval page: set "
            "approvals.public_url to the address of a gateway that serves it over HTTP on the same store"
        )
    return None


async def run_check(config: GatewayConfig, schemas: bool, explain: list[str] | None = None) -> int:
    """The ``check`` subcommand."""
    from gateway.preflight import check

    return await check(config, print, schemas=schemas, explain=explain)


async def run_audit(config: GatewayConfig, args: argparse.Namespace) -> int:
    """The ``audit list`` and ``audit verify`` subcommands."""
    from gateway.audit import chain, display
    from gateway.stores import open_store

    if config.gateway.store == "memory":
        print("mcp-safety-gateway audit: the memory store keeps no audit beyond its process", file=sys.stderr)
        return 2
    store = open_store(config.gateway.store)
    try:
        entries = [entry async for entry in store.audit_entries()]
    finally:
        await store.close()
    if args.audit_command == "verify":
        problems = chain.verify(entries)
        for problem in problems:
            print(f"FAIL  {problem}")
        if problems:
            return 1
        head = entries[-1].hash if entries else "(empty)"
        print(f"ok    {len(entries)} entries, chain intact, head {head}")
        return 0
    try:
        since = datetime.fromisoformat(args.since.replace("Z", "+00:00")).timestamp() if args.since else None
    except ValueError:
        print(
            f"mcp-safety-gateway audit: --since {args.since!r} is not a time like 2026-12-02T18:00:00Z", file=sys.stderr
        )
        return 2
    shown = [e for e in entries if display.matches(e, target=args.tenant, caller=args.caller, since=since)]
    if args.json:
        for entry in shown:
            print(json.dumps(dataclasses.asdict(entry)))
    else:
        print(display.table(shown))
    return 0


async def recover(gw: Gateway) -> None:
    """The start-up step of ``serve``: keys a crash left in flight read outcome_unknown, each with its audit entry."""
    from gateway.audit.trail import recover

    await recover(gw.store, gw.clock())


async def serve_stdio(config: GatewayConfig) -> None:
    """Serve one MCP connection on stdin/stdout."""
    from mcp.server.stdio import stdio_server

    from gateway.runtime import open_gateway
    from gateway.server import build_server

    async with open_gateway(config) as gw:
        await recover(gw)
        server = build_server(gw)
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())


async def serve_http(config: GatewayConfig, host: str, port: int, insecure: bool = False) -> None:
    """Serve streamable HTTP until interrupted."""
    import uvicorn

    from gateway.config.loopback import is_loopback
    from gateway.http.app import build_app
    from gateway.runtime import open_gateway

    async with open_gateway(config) as gw:
        await recover(gw)
        if is_loopback(host):
            gw.served_at = f"http://{'[' + host + ']' if ':' in host else host}:{port}"
        app = build_app(gw, insecure_without_auth=insecure)
        log.info("gateway listening on http://%s:%d/mcp", host, port)
        uv = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_config=None, access_log=False, lifespan="on"))
        await uv.serve()


if __name__ == "__main__":
    sys.exit(main())
