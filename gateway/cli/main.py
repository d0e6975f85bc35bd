"""``mcp-safety-gateway``: serve the gateway over HTTP or stdio, check a config, call a tool, read the audit,
inspect a server and draft its config, migrate a PostgreSQL store.

Only ``serve`` changes the gateway's state at start (start-up recovery of keys a crash left in flight);
``check``, ``audit``, ``call`` and ``inspect`` never do, and ``migrate`` changes only the store's schema. Each
subcommand imports what it needs when it runs, so ``--help`` stays quick.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gateway.config import GatewayConfig

DEFAULT_PORT = 8080
DEFAULT_URL = f"http://127.0.0.1:{DEFAULT_PORT}/mcp"
BUILT_IN = "the built-in demo config; state in the platform state dir"
OPERATOR_ACTIONS = ("sessions", "passkeys")
"""The ``approvals`` actions an operator runs against the store itself (the others call the page's API)."""

VALUED = ("--revoke", "--person")
"""The options whose value is an id or a subject an operator copies from a listing, which may start with '-'."""

log = logging.getLogger("gateway")


def main(argv: list[str] | None = None) -> int:
    """Entry point of the console script."""
    parser = argparse.ArgumentParser(prog="mcp-safety-gateway", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the gateway (HTTP on 127.0.0.1:8080/mcp, or --stdio)")
    serve.add_argument(
        "--config", help=f"TOML file; relative paths in it are taken from its folder (default: {BUILT_IN})"
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default: %(default)s)")
    serve.add_argument(
        "--port", type=port_number, default=DEFAULT_PORT, help="port to listen on (default: %(default)s)"
    )
    serve.add_argument("--stdio", action="store_true", help="speak MCP on stdin/stdout instead of HTTP")
    serve.add_argument(
        "--workers",
        type=int,
        default=1,
        help="HTTP worker processes on the one port, for a Redis or PostgreSQL store (default: %(default)s)",
    )
    serve.add_argument(
        "--log-level", choices=["debug", "info", "warning", "error"], help="overrides [logging] level (default: info)"
    )
    serve.add_argument(
        "--insecure-listen-without-auth",
        action="store_true",
        help="with no [auth] verifier, still start when others could reach the gateway: a non-loopback --host, "
        "[http] settings that admit other hosts or origins, requests relayed by a proxy (anyone who can reach it "
        "can write)",
    )
    init = commands.add_parser("init", help="write a commented config to edit: DIR/gateway.toml")
    init.add_argument("dir", nargs="?", default=".", metavar="DIR", help="where to write it (default: %(default)s)")
    init.add_argument("--force", action="store_true", help="overwrite an existing DIR/gateway.toml")
    check = commands.add_parser("check", help="validate a config against its backend and print the tools")
    check.add_argument("--config", help=f"TOML file (default: {BUILT_IN})")
    check.add_argument("--schemas", action="store_true", help="also print every input and output schema")
    check.add_argument(
        "--port",
        type=port_number,
        default=DEFAULT_PORT,
        help="the port serve will listen on, which approvals.public_url on this machine must name "
        "(default: %(default)s)",
    )
    check.add_argument(
        "--probe-actions",
        action="store_true",
        help="when the god-tool's schema does not list its actions, call it once with an action that cannot exist "
        "and look for the write actions in its refusal",
    )
    check.add_argument(
        "--explain",
        nargs="+",
        metavar="WORD",
        help="WRITE_TOOL TARGET [key=value ...]: which approval rule a plan for that target would hit",
    )
    call = commands.add_parser("call", help="call one tool on a running gateway and answer its prompts here")
    call.add_argument("tool")
    call.add_argument(
        "arguments", nargs="*", metavar="key=value|key:=json", help="typed by the tool's inputSchema; := sends JSON"
    )
    call.add_argument("--json", action="store_true", help="print the raw JSON answer")
    call.add_argument(
        "--answers-from-stdin",
        action="store_true",
        help="let a stdin that is not a terminal answer confirmation prompts (scripts; default: a tool that may "
        "write is not called from one)",
    )
    tools = commands.add_parser("tools", help="list a running gateway's tools: annotations and arguments")
    tools.add_argument("--json", action="store_true", help="one tool per line as the gateway describes it")
    for sub in (call, tools):
        sub.add_argument("--url", default=DEFAULT_URL, help="the gateway's MCP endpoint (default: %(default)s)")
        sub.add_argument(
            "--token-env", default="GATEWAY_TOKEN", help="env var holding a bearer token (default: %(default)s)"
        )
    audit = commands.add_parser("audit", help="read or verify the audit trail in the configured store")
    audit_commands = audit.add_subparsers(dest="audit_command", required=True)
    listing = audit_commands.add_parser("list", help="the entries, oldest first")
    listing.add_argument("--tenant", help="only this target id")
    listing.add_argument("--caller", help="only this caller")
    listing.add_argument("--plan", help="only this plan's entries: a write's events in order (proposed ... returned)")
    listing.add_argument("--since", help="only entries at or after this UTC time (2026-12-02T18:00:00Z)")
    listing.add_argument("--json", action="store_true", help="one JSON object per line")
    verify = audit_commands.add_parser("verify", help="check the keyed chain: edits, deletions, reordering")
    verify.add_argument("--head", help="also check the chain still holds this SEQ:HASH (from `audit head`)")
    verify.add_argument(
        "--unkeyed-through",
        type=int,
        default=0,
        metavar="SEQ",
        help="accept unkeyed entries up to SEQ: those sealed before an upgrade keyed the chain",
    )
    verify.add_argument(
        "--bundle",
        metavar="FILE",
        help="check an evidence bundle from `audit export` instead, offline: no config, no store, no key",
    )
    export = audit_commands.add_parser(
        "export", help="one plan's evidence bundle (its entries and the passkeys that signed them), as JSON"
    )
    export.add_argument("--plan", required=True, help="the plan whose entries to export")
    head = audit_commands.add_parser("head", help="print the newest entry as SEQ:HASH, to keep outside the store")
    trim = audit_commands.add_parser("trim", help="delete entries older than a time, leaving a checkpoint")
    trim.add_argument("--before", required=True, help="delete entries before this UTC time (2026-12-02T18:00:00Z)")
    for sub in (listing, verify, export, head, trim):
        sub.add_argument("--config", help=f"TOML file (default: {BUILT_IN})")
    migrate = commands.add_parser(
        "migrate", help="create or upgrade a PostgreSQL store's tables (idempotent; other stores need nothing)"
    )
    migrate.add_argument("--config", help=f"TOML file (default: {BUILT_IN})")
    inspecting = commands.add_parser(
        "inspect", help="read any MCP server's tools (initialize and tools/list only), report, and draft a config"
    )
    where = inspecting.add_mutually_exclusive_group(required=True)
    where.add_argument(
        "--command", dest="server_command", help='a stdio server\'s command line, e.g. "python -m my_server --stdio"'
    )
    where.add_argument("--url", help="a streamable-HTTP server's MCP endpoint")
    inspecting.add_argument(
        "--header", action="append", default=[], metavar="'NAME: VALUE'", help="for this connection only"
    )
    inspecting.add_argument(
        "--header-env",
        action="append",
        default=[],
        metavar="NAME=ENV_VAR",
        help="a header whose value is in an environment variable (the draft keeps the variable's name)",
    )
    inspecting.add_argument("--draft", metavar="FILE", help="write a draft config with TODOs to FILE")
    inspecting.add_argument("--json", action="store_true", help="print the findings as JSON")
    inspecting.add_argument("--timeout", type=float, default=60.0, help="seconds to connect and read (default 60)")
    approvals = commands.add_parser(
        "approvals",
        help="list, approve or reject writes waiting for approval; list or revoke approvers' sessions and passkeys"
        " (operator)",
    )
    approvals.add_argument("action", choices=["list", "approve", "reject", "sessions", "passkeys"])
    approvals.add_argument("ids", nargs="*", metavar="APPROVAL_ID")
    approvals.add_argument(
        "--config", help=f"sessions, passkeys: the TOML file whose store holds them (default: {BUILT_IN})"
    )
    approvals.add_argument(
        "--revoke",
        action="append",
        default=[],
        metavar="ID",
        help="sessions: end this session; passkeys: revoke this credential (repeatable)",
    )
    approvals.add_argument(
        "--person",
        help="sessions, passkeys: every one of this person (a subject, or 'subject (issuer)' as listed)",
    )
    approvals.add_argument(
        "--url", default=DEFAULT_URL.removesuffix("/mcp"), help="the gateway's base URL (default: %(default)s)"
    )
    approvals.add_argument(
        "--token-env",
        default="GATEWAY_APPROVER_TOKEN",
        help="env var holding your approver token (default: %(default)s)",
    )
    approvals.add_argument("--json", action="store_true", help="one JSON object per line")
    approvals.add_argument(
        "--unattended",
        action="store_true",
        help="decide without a person at a terminal: token from --token-env, no question asked (a script's way;"
        " any program that can read that variable can then approve)",
    )
    args = parser.parse_args(joined_values(sys.argv[1:] if argv is None else argv))
    if args.command == "approvals" and args.action in ("approve", "reject") and not args.ids:
        parser.error(f"approvals {args.action} needs at least one APPROVAL_ID")
    if args.command == "approvals" and args.action not in OPERATOR_ACTIONS and (args.revoke or args.person):
        parser.error("--revoke and --person go with approvals sessions or approvals passkeys")
    try:
        return run(args)
    except BrokenPipeError:
        # The reader went away (`audit list | head`): stop quietly, and keep Python's exit-time flush quiet too.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def joined_values(argv: list[str]) -> list[str]:
    """``--revoke -Ab3`` as ``--revoke=-Ab3``: the ids an operator names are base64url, so one in 64 starts with '-',
    and argparse would read it as an option and refuse the command (``--person`` likewise). Only ``approvals``
    takes these; words after ``--`` and a flag with nothing after it are left as they are."""
    if argv[:1] != ["approvals"]:
        return argv
    joined: list[str] = []
    words = iter(argv)
    for word in words:
        if word == "--":
            return [*joined, word, *words]
        following = next(words, None) if word in VALUED else None
        joined.append(word if following is None else f"{word}={following}")
    return joined


def port_number(text: str) -> int:
    """A TCP port from the command line (argparse says the sentence, and exits 2, for anything else)."""
    port = int(text) if text.strip().isdigit() else -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number: give one in 0-65535")
    return port


def run(args: argparse.Namespace) -> int:
    """Run the parsed subcommand."""
    if args.command == "inspect":
        return run_inspect(args)
    if args.command == "approvals" and args.action not in OPERATOR_ACTIONS:
        from gateway.cli import approvals

        return approvals.run(args.url, args.action, args.ids, args.token_env, args.json, args.unattended)
    if args.command in ("call", "tools"):
        from gateway.cli.call import terminal

        if args.command == "tools":
            return terminal.run_tools(args.url, args.token_env, args.json)
        return terminal.run(args.url, args.tool, args.arguments, args.token_env, args.json, args.answers_from_stdin)
    if args.command == "init":
        return run_init(Path(args.dir), args.force)
    if args.command == "audit" and getattr(args, "bundle", None):
        from gateway.cli.audit import verify_bundle

        return verify_bundle(Path(args.bundle))

    import anyio

    from gateway.config import ConfigError, load_config
    from gateway.observability import logs

    try:
        config = load_config(args.config)
    except ConfigError as exc:
        print(f"mcp-safety-gateway: {exc}", file=sys.stderr)
        return 2
    from gateway.identity.secrets import secret_refusal

    refusal = secret_refusal(config)
    if refusal is not None:
        print(f"mcp-safety-gateway: {refusal}", file=sys.stderr)
        return 2
    from gateway.cli import migrate

    if args.command == "migrate":
        return anyio.run(migrate.run, config)
    if args.command in ("check", "serve"):
        refusal = lease_refusal(config)
        if refusal is not None:
            print(f"mcp-safety-gateway: {refusal}", file=sys.stderr)
            return 2
    refusal = anyio.run(migrate.schema_refusal, config)  # serve, check, audit: the store's schema is this gateway's
    if refusal is not None:
        print(f"mcp-safety-gateway: {refusal}", file=sys.stderr)
        return 2
    if args.command == "check":
        logs.configure("error", "text")
        return anyio.run(run_check, config, args.schemas, args.explain, args.probe_actions, args.port)
    if args.command == "audit":
        logs.configure("error", "text")
        return anyio.run(run_audit, config, args)
    if args.command == "approvals":
        from gateway.cli import passkeys, sessions

        logs.configure("error", "text")
        operator = passkeys.run if args.action == "passkeys" else sessions.run
        return anyio.run(operator, config, args.revoke, args.person, args.json)
    logs.configure(args.log_level or config.logging.level, config.logging.format)
    for warning in [*config.republished_god_tools(), *config.statement_warnings()]:
        log.warning("%s", warning)
    from gateway.audit.sinks import SinkError
    from gateway.errors import StoreInUse
    from gateway.observability import tracing

    flush_traces = tracing.configure(config.gateway.name)
    from gateway.cli.serve import serve

    try:
        return serve(args, config)
    except (SinkError, StoreInUse) as exc:
        print(f"mcp-safety-gateway: {exc}", file=sys.stderr)
        return 2
    finally:
        if flush_traces is not None:
            flush_traces()


def run_init(directory: Path, force: bool) -> int:
    """The ``init`` subcommand."""
    from gateway.cli.init import InitError, write_config

    try:
        target = write_config(directory, force=force)
    except InitError as exc:
        print(f"mcp-safety-gateway init: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {target}; edit it, then: mcp-safety-gateway serve --config {target}")
    return 0


def lease_refusal(config: GatewayConfig) -> str | None:
    """Why a shared store's lock lease is too short for the longest write timeout (any backend's, any tool's), or
    None."""
    from gateway.stores.leases import lease_refusal

    timeouts = {}
    for name, section in config.backend_sections().items():
        table = "backend" if section is config.backend else f"backends.{name}"
        timeouts[f"{table}.call_timeout_seconds"] = section.call_timeout_seconds
    for name, tool in config.tools.items():
        timeout = tool.write_timeout()
        if timeout is not None:
            timeouts[f"tools.{name}.{timeout[0]}"] = timeout[1]
    return lease_refusal(config.gateway.store, timeouts)


async def run_check(
    config: GatewayConfig,
    schemas: bool,
    explain: list[str] | None = None,
    probe_actions: bool = False,
    port: int = DEFAULT_PORT,
) -> int:
    """The ``check`` subcommand; ``port`` is where ``serve`` will listen (the approval page's links are checked
    against it, or against ``page_listen``'s port where the stdio process serves the page)."""
    from gateway.cli.check import check
    from gateway.cli.serve import public_url_warning

    listen = config.approvals.page_listen
    page_port = int(listen.rpartition(":")[2]) if listen is not None and not listen.endswith(":0") else port
    warning = public_url_warning(config, page_port)
    return await check(
        config,
        print,
        schemas=schemas,
        explain=explain,
        probe_actions=probe_actions,
        warnings=[warning] if warning is not None else [],
    )


def run_inspect(args: argparse.Namespace) -> int:
    """The ``inspect`` subcommand."""
    import shlex

    from gateway.cli.inspect.probe import Server, inspect
    from gateway.observability import logs

    logs.configure("error", "text")
    try:
        headers = dict(_pair(text, ":") for text in args.header)
        from_env = dict(_pair(text, "=") for text in args.header_env)
        command = shlex.split(args.server_command) if args.server_command else []
    except ValueError as exc:
        print(f"mcp-safety-gateway inspect: {exc}", file=sys.stderr)
        return 2
    server = Server(command=command, url=args.url, headers=headers, headers_from_env=from_env)
    draft_to = Path(args.draft) if args.draft else None
    return inspect(server, print, draft_to=draft_to, as_json=args.json, seconds=args.timeout)


def _pair(text: str, separator: str) -> tuple[str, str]:
    name, found, value = text.partition(separator)
    if not found or not name.strip():
        raise ValueError(f"{text!r} is not NAME{separator}VALUE")
    return name.strip(), value.strip()


async def run_audit(config: GatewayConfig, args: argparse.Namespace) -> int:
    """The ``audit`` subcommands (gateway.cli.audit)."""
    from gateway.cli.audit import run

    return await run(config, args)


if __name__ == "__main__":
    sys.exit(main())
