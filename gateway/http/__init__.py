"""The HTTP face: the Starlette app (``app``), per-request answer modes for stateful sessions (``sessions``), and
bearer-token verifiers (``auth``)."""
