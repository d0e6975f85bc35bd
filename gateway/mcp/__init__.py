"""The MCP surface: the low-level SDK server that lists the published tools and routes each call.

    server   the handlers: observe a call, answer it, serve the task methods; no exception text reaches a client
    calls    one call routed and answered in codes (what a client's call and a resumed task both run)
    chain    the ordered steps every call passes before its tool (audit, authorize, rate limit, caps, schema)
    tasks    the tasks extension: tasks/get, tasks/update, tasks/cancel, and resuming a task once people decided

Imported only by the edges (gateway.http and gateway.cli); imports the tools, the write package and the runtime.
"""
