"""The published tools other than the planned write, one module per kind, and the registry of every kind.

kinds        the kind registry: a tool's call to the object that carries it out (the only module that tells the
             config classes apart; each kind's data lives on its config model, gateway.config.kinds)
listing      a read tool: one bounded page of a backend list, with an opaque cursor
preview      a preview tool: reads the target, computes the effect, issues a caller-bound plan
passthrough  a backend's own read-only tool, published on purpose: a checked relay

The tools that write (a planned write, a backend's own tool that writes) are the gateway.write package.
"""
