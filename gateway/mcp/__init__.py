"""The MCP surface: the low-level SDK server that lists the published tools and routes each call.

    server   the handlers: observe a call, answer it, serve the task methods; no exception text reaches a client
    calls    one call routed and answered in codes (what a client's call and a resumed task both run)
    chain    the ordered steps every call passes before its tool (audit, authorize, rate limit, caps, schema)
    tasks    the tasks extension: tasks/get, tasks/update, tasks/cancel
    approval the tool-approval extension (a draft, experimental) over it: the task's shape and its disposition
    resume   resuming a task once people decided: the call made again, as its caller, and its answer kept
    listen   subscriptions/listen: tools list changes and the caller's own tasks, pushed

Imported only by the edges (gateway.http and gateway.cli); imports the tools, the write package and the runtime.
"""
