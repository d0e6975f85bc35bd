"""``mcp-safety-gateway serve``: the gateway over HTTP (uvicorn on a socket bound first) or stdio, with the approval
page beside a stdio gateway, and the refusals and warnings it says before it starts.

Over HTTP the socket is bound before anything else starts (gateway/http/sockets.py), then the gateway opens its
store, recovers keys a crash left in flight, and serves until SIGTERM; with ``--workers N`` (Redis and PostgreSQL
stores) N such processes share the socket under a supervisor (gateway/cli/workers.py). Over stdio the approval page,
when a tool can ask for people and ``public_url`` names no other gateway, is served on ``approvals.page_listen`` or on
the loopback port kept in the state directory (``approval-page.port``), so the links an agent already showed still
open it after the host restarts the gateway. Either way a ``public_url`` on this machine at another port than
the page's is warned about: its links would go nowhere.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import socket

    import uvicorn
    from starlette.types import ASGIApp

    from gateway.config import GatewayConfig
    from gateway.runtime import Gateway

KEPT = "kept"
"""``page_listen``'s answer for the stdio page's default: the loopback port kept in the state directory."""

log = logging.getLogger("gateway")


def serve(args: argparse.Namespace, config: GatewayConfig) -> int:
    """The ``serve`` subcommand, over stdio or HTTP."""
    if args.stdio:
        refusal = stdio_refusal(config)
        if refusal is not None:
            print(f"mcp-safety-gateway: {refusal}", file=sys.stderr)
            return 2
        log_where_state_lives(config)
        run_serving(serve_stdio, config)
        return 0
    insecure = args.insecure_listen_without_auth
    from gateway.cli.workers import supervise, workers_refusal

    refusal = bind_refusal(args.host, config, insecure) or workers_refusal(config.gateway.store, args.workers)
    if refusal is not None:
        print(f"mcp-safety-gateway: {refusal}", file=sys.stderr)
        return 2
    from gateway.http.sockets import ListenError, bound_socket

    try:
        sock = bound_socket(args.host, args.port)
    except ListenError as exc:
        print(f"mcp-safety-gateway: {exc}", file=sys.stderr)
        return 1
    log_where_state_lives(config)
    port = sock.getsockname()[1]
    warn_of_links_elsewhere(config, port)
    if args.workers > 1:
        sock.close()  # it said whether the port is free; the supervisor holds it with one the workers can share
        held = bound_socket(args.host, port, shared=True)
        return supervise(args.workers, lambda: _worker(config, held, args.host, port, insecure))
    run_serving(serve_http, config, sock, args.host, port, insecure)
    return 0


def run_serving(serving: Callable[..., Awaitable[None]], *args: Any) -> None:
    """Run a serve to its end on uvloop's event loop (a dependency where it builds: not on Windows), else on
    asyncio's own. uvloop's transports and callbacks are C: less CPU per call (bench/RESULTS.md). Nothing the
    gateway starts goes through uvloop's own process spawning, which hands a child copies of the parent's
    descriptors: a stdio backend is started with the standard library's ``subprocess`` (gateway/backend/stdio.py;
    tests/system/test_backend_inheritance.py checks what it gets)."""
    import anyio

    try:
        import uvloop  # noqa: F401  # only whether it is there
    except ImportError:
        anyio.run(serving, *args)
    else:
        anyio.run(serving, *args, backend_options={"use_uvloop": True})


def _worker(config: GatewayConfig, held: socket.socket, host: str, port: int, insecure: bool) -> int:
    """One worker of ``serve --workers N``: the ordinary HTTP serve on a socket of its own on the supervisor's
    port (which the supervisor's socket, never listening, holds while workers come and go)."""
    from gateway.http.sockets import bound_socket

    held.close()
    run_serving(serve_http, config, bound_socket(host, port, shared=True), host, port, insecure)
    return 0


def log_where_state_lives(config: GatewayConfig) -> None:
    """Say at start where plans, keys, the audit and the secret key are kept (stderr, like every log line)."""
    from gateway.config.paths import where_state_lives
    from gateway.identity.secrets import from_environment

    log.info(where_state_lives(config.gateway, from_environment()))


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
    url_tools = [name for name, tool in config.tools.items() if "url" in tool.modes()]
    if url_tools and page_listen(config) in (KEPT, "127.0.0.1:0") and config.approvals.login == "oidc":
        return (
            f"tools.{url_tools[0]} can ask for approval on the page (confirm or an approval rule is 'url'), and the "
            "page this stdio process serves on a port of its choosing cannot be registered at an identity provider: "
            "set approvals.page_listen to a fixed loopback port and approvals.public_url to its address"
        )
    return None


def page_listen(config: GatewayConfig) -> str | None:
    """Where ``serve --stdio`` serves the approval page itself: ``page_listen``, else (no ``public_url`` either)
    KEPT, the loopback port kept in the state directory; None when the gateway at ``public_url`` serves it."""
    approvals = config.approvals
    if approvals.page_listen is not None:
        return approvals.page_listen
    return KEPT if approvals.public_url is None else None


def public_url_warning(config: GatewayConfig, port: int) -> str | None:
    """Why approval links would go nowhere: ``public_url`` is this machine, at another port than ``port``, where
    the page is served (``init`` writes one for port 8080); None when they would not."""
    from urllib.parse import urlsplit

    from gateway.config.loopback import loopback_port

    public_url = config.approvals.public_url
    linked = loopback_port(public_url) if public_url is not None and config.approvals.configured else None
    if public_url is None or linked is None or linked == port:
        return None
    parts = urlsplit(public_url)
    host = parts.netloc.rpartition("@")[2].removesuffix(f":{parts.port}") if parts.port else parts.netloc
    fixed = parts._replace(netloc=f"{host}:{port}").geturl()
    return (
        f"approvals.public_url {public_url} is port {linked} of this machine, but the approval page is served on "
        f"port {port}: every approval link would go to port {linked}; set public_url = {fixed!r}, or serve on "
        f"port {linked}"
    )


def warn_of_links_elsewhere(config: GatewayConfig, port: int) -> None:
    """Log ``public_url_warning`` at start, if there is one."""
    warning = public_url_warning(config, port)
    if warning is not None:
        log.warning("%s", warning)


def serving(how: str) -> str:
    """This ``serve`` process, as a second one on the same SQLite store is told (gateway/stores/serving.py)."""
    started = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return f"mcp-safety-gateway serve (pid {os.getpid()}, {how}, started {started})"


async def recover(gw: Gateway) -> None:
    """The start-up step of ``serve``: keys a crash left in flight read outcome_unknown, each with its audit entry.
    It runs once the store is this process's (open_gateway's ``serving``)."""
    from gateway.audit.trail import recover

    await recover(gw.store, gw.clock())


async def serve_stdio(config: GatewayConfig) -> None:
    """Serve one MCP connection on stdin/stdout."""
    from mcp.server.stdio import stdio_server

    from gateway.mcp import resume
    from gateway.mcp.server import build_server
    from gateway.runtime import open_gateway

    async with open_gateway(config, serving=serving("over stdio")) as gw:
        await recover(gw)
        await gw.settle()
        server = build_server(gw)
        async with resume.resumed(gw), approval_page(gw), stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())


@asynccontextmanager
async def approval_page(gw: Gateway) -> AsyncIterator[None]:
    """Beside ``serve --stdio``: the approval page on a loopback port (``page_listen``, else the port kept in the
    state directory, so that links shown before a restart still open it) when a tool can ask for people and no
    other gateway serves the page; its address is logged on stderr, and links point there unless
    ``approvals.public_url`` names it otherwise."""
    import anyio
    import uvicorn

    from gateway.http.app import build_page_app
    from gateway.http.sockets import bound_socket, kept_port_socket

    config = gw.config
    url_tools = [name for name, tool in config.tools.items() if "url" in tool.modes()]
    listen = page_listen(config)
    if not url_tools or listen is None:
        yield
        return
    if listen == KEPT:
        host, sock = "127.0.0.1", kept_port_socket(config.gateway.state_path(), "127.0.0.1")
    else:
        host = listen.rpartition(":")[0]
        sock = bound_socket(host.strip("[]"), int(listen.rpartition(":")[2]))
    bound_port = sock.getsockname()[1]
    warn_of_links_elsewhere(config, bound_port)
    gw.served_at = f"http://{host}:{bound_port}"
    server = uvicorn.Server(uvicorn_config(build_page_app(gw), lifespan="off"))
    log.info("approval page at %s/approvals (for %s)", gw.served_at, ", ".join(url_tools))
    async with anyio.create_task_group() as group:
        group.start_soon(server.serve, [sock])
        try:
            yield
        finally:
            server.should_exit = True
            group.cancel_scope.cancel()


async def serve_http(config: GatewayConfig, sock: socket.socket, host: str, port: int, insecure: bool = False) -> None:
    """Serve streamable HTTP on an already bound socket until interrupted."""
    import uvicorn

    from gateway.config.loopback import is_loopback
    from gateway.http.app import build_app
    from gateway.mcp import resume
    from gateway.runtime import open_gateway

    async with open_gateway(config, serving=serving(f"HTTP on http://{host}:{port}/mcp")) as gw:
        await recover(gw)
        await gw.settle()
        if is_loopback(host):
            gw.served_at = f"http://{'[' + host + ']' if ':' in host else host}:{port}"
        app = build_app(gw, insecure_without_auth=insecure)

        class Serving(uvicorn.Server):
            async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
                gw.close_streams()  # listen streams end first: uvicorn waits for every open response
                await super().shutdown(sockets)

        uv = Serving(uvicorn_config(app, host=host, port=port, lifespan="on"))
        log.info("gateway listening on http://%s:%d/mcp", host, port)
        stop_quietly_on_sigterm()
        async with resume.resumed(gw):
            await uv.serve(sockets=[sock])


def uvicorn_config(app: ASGIApp, **options: Any) -> uvicorn.Config:
    """How ``serve`` runs uvicorn: no logging of its own (the gateway's), and none of its proxy-header handling,
    which would believe any loopback peer's X-Forwarded-For; the gateway's edge decides whom to believe
    (``[http] trusted_proxies``, gateway/http/proxies.py)."""
    import uvicorn

    return uvicorn.Config(app, log_config=None, access_log=False, proxy_headers=False, **options)


def stop_quietly_on_sigterm() -> None:
    """Let a SIGTERM end ``serve`` through its closing steps (refusal counts stored, the store closed).

    uvicorn stops on the signal and then raises it again for the handler that was there before; with the
    default handler that kills the process before open_gateway's ``finally`` runs. Once uvicorn is done,
    this handler only lets the function return."""
    import signal

    signal.signal(signal.SIGTERM, lambda signum, frame: None)
