"""The HTTP face: the Starlette app (``app``), Host/Origin checks (``edge``), whose forwarded headers are believed
(``proxies``: only a trusted proxy's), body caps on every route but /mcp (``bodies``), per-request answer modes
for stateful sessions (``sessions``) and their quotas (``quota``), the listening socket (``listen``), and the
approval page (``page/``). Bearer tokens are checked by gateway.identity.verifiers."""
