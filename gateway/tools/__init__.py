"""The published tools other than the planned write, one module per kind, and the registry of every kind.

kinds        the kind registry: a tool's config to the object that carries out its calls (the only module that
             tells the config classes apart; each kind's data lives on its config model, gateway.config.kinds)
listing      a read tool: one bounded page of a backend list, with an opaque cursor
preview      a preview tool: reads the target, computes the effect, issues a caller-bound plan
passthrough  a backend's own tool, published on purpose; a writing one is confirmed and keyed like a write

The planned write itself is the gateway.write package.
"""
