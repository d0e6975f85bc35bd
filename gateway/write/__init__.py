"""The destructive-write pipeline, the product: preview's plan -> ask -> lock -> claim -> send -> settle.

    steps        the write's decisions, pure (the step table is at its top); loads no I/O stack
    audited      one call of a tool that writes, and the one audit entry its decision leaves
    choice       the approval rules where a write is decided: the mode at preview, at call time, and a mode
                 that only tightens where the write happens (the counters now)
    driver       what every write shares: the key first, then the claim -> send -> settle skeleton
    planned      a planned write: its steps 4-7 and the hooks the driver calls
    passthrough  a backend's own tool that writes: its arguments stand in for a plan, then the driver
    statement    a statement preview's plan: its statement analysed again, measured again, then the driver
    unsettled    outcomes (and their audit entries) the store could not take yet, kept until it can
    parts        what the write uses of the running gateway, as one narrow interface
    progress     progress notifications to a client that asked for them
    ask/         asking: the yes a mode asks for (``yes``), from a form in both protocol eras (``form``) or from
                 people on the approval page (``people``), or as a task (``task``)

Imported by the tools (gateway.tools), the MCP surface (gateway.mcp: the chain opens a writing call's audit entry),
the runtime (``unsettled``) and the terminal client (``progress``'s step names); imports stores, audit, approvals,
backend, catalog, config, identity, observability and the protocol's facts (gateway.protocol), never the surface
above it.
"""
