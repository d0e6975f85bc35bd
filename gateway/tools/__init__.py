"""The published tools other than the writes, one module per kind, and the registry of every kind.

kinds/       the kind registry: each kind of tool as one object (its config model, ``check`` step and call),
             found by the config's ``kind`` in one dict (the only code that tells the config models apart)
listing      a read tool: one bounded page of a backend list, with an opaque cursor
preview      a preview tool: reads the target, computes the effect, issues a caller-bound plan
passthrough  a backend's own read-only tool, published on purpose: a checked relay
statement_query    a statement-executing server's read: analysed, relayed to its read tool, bounded
statement_preview  a statement write: analysed, measured through the server's read tool, a caller-bound plan

The tools that write (a planned write, a backend's own tool that writes) are the gateway.write package. Imported by
the MCP surface (gateway.mcp) and the CLI; imports the write package, the runtime and everything below them.
"""
