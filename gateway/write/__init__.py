"""The destructive-write pipeline, the product: preview's plan -> ask -> lock -> claim -> send -> settle.

    steps        the write's decisions, pure (the step table is at its top); loads no I/O stack
    driver       what every write shares: its one audit entry, and the claim -> send -> settle skeleton
    choice       the approval rules where the write happens: the counters now, a mode that only tightens
    planned      a planned write: the I/O of steps 3-7, then the driver
    passthrough  a backend's own tool that writes: its arguments stand in for a plan, then the driver
    unsettled    outcomes (and their audit entries) the store could not take yet, kept until it can
    progress     progress notifications to a client that asked for them
    ask/         asking: the yes a mode asks for (``yes``), from a form in both protocol eras (``form``) or from
                 people on the approval page (``people``)

Imported by the tools (gateway.tools) and the MCP surface; imports stores, audit, approvals, backend, catalog,
config and identity, never the surface above it.
"""
