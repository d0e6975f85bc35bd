"""The HTTP face: the Starlette app (``app``), the front door that takes MCP requests past its router (``front``),
Host/Origin checks (``edge``), whose forwarded headers are believed (``proxies``: only a trusted proxy's), body caps on
every route but /mcp (``bodies``), per-request answer modes for stateful sessions (``answer_modes``) and their quotas
(``quota``), the lean paths for a call of a reading tool (``lean`` for a 2026-07-28 request, ``session_reads`` for one
in a 2025-era session), the listening socket (``sockets``), and the approval page (``page/``). Bearer tokens are checked
by gateway.identity.verifiers.

An edge: imported only by the CLI (``serve``); imports the MCP surface, the runtime, the tool kinds (which calls the
lean paths answer), approvals, audit, identity and config."""
