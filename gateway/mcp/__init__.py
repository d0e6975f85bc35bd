"""The MCP surface: the low-level SDK server that lists the published tools and routes each call.

    server   the handlers: observe a call, route it, answer in codes; no exception text reaches a client
    chain    the ordered steps every call passes before its tool (audit, authorize, rate limit, caps, schema)

Imported only by the edges (gateway.http and gateway.cli); imports the tools, the write package and the runtime.
"""
