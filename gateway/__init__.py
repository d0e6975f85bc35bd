"""mcp-safety-gateway: an unchanged legacy god-tool server behind honestly annotated, risk-split MCP tools.

The rooms, from the edges down; each imports only rooms below it (tests/unit/test_layout.py checks the shape):

    cli/            the subcommands: serve, check, init, audit, approvals, call/tools, inspect
    http/           the HTTP face: edge checks, the Starlette app, sessions; the approval page (http/page/)
    mcp/            the MCP surface: list the tools, route a call through its admission chain
    tools/          the tools other than the planned write: listing, preview, pass-through
    runtime         one running gateway's parts (config, backends, store, keys, clock, catalog)
    write/          the destructive-write pipeline: steps (pure), planned, outcome, ask/
    approvals/      an approval's lifecycle, the approval rules (CEL), notices to approvers
    stores/         plans, keys, locks, nonces, buckets, approvals, the audit log: memory, SQLite, Redis, PostgreSQL
    audit/          the audit trail: the keyed chain, entries kept, shown and streamed
    backend/        the legacy server as the gateway sees it: one interface, an MCP client, capped transports
    catalog/        the published tools built from config: schemas, annotations, argument checks
    identity/       principals, the current caller, bearer-token verifiers, secret keys
    config/         TOML in, frozen models out; the config's path and template language (config/expressions)
    statements/     SQL for statement-executing backends: class, tables, refusals, measuring reads (pure)
    observability/  logs, metrics, traces
    ratelimit       per-caller and per-tool limits over the store's buckets
    records, errors, text, signing, cursor, crashpoints, protocol: small shared pieces at the bottom
"""
