"""The HTTP face: the Starlette app (``app``), Host/Origin checks (``edge``), per-request answer modes for
stateful sessions (``sessions``) and their quotas (``quota``), the listening socket (``listen``), and the
approval page (``page/``). Bearer tokens are checked by gateway.identity.verifiers."""
