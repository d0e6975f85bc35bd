"""The published tools other than the planned write, one module per kind.

listing      a read tool: one bounded page of a backend list, with an opaque cursor
preview      a preview tool: reads the target, computes the effect, issues a caller-bound plan
passthrough  a backend's own tool, published on purpose; a writing one is confirmed and keyed like a write

The planned write itself is the gateway.write package.
"""
