"""The MCP surface: the low-level SDK server that lists the published tools and routes each call.

    server   the handlers, their ordered admission chain, and coded answers; no exception text reaches a client

Imported only by the edges (gateway.http and gateway.cli); imports the tools, the write package and the runtime.
"""
