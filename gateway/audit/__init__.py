"""The audit trail: one entry per decision of a write tool, hash-chained, kept by the store.

    chain     sealing an entry into the hash chain, and verifying a chain        (pure; used by every store)
    trail     writing entries: the policy when one cannot be stored, and the entries start-up recovery adds
    display   reading them: ``audit list``'s filters and table

The write tool (gateway.tools.write) decides what an entry says; this package decides how it is kept and shown.
"""
