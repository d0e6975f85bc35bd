"""The audit trail: one entry per decision of a write tool, in a keyed hash chain, kept by the store.

    chain     sealing an entry into the keyed chain, verifying a chain, trim checkpoints  (pure; every store)
    trail     writing entries: where one is known stored, the policy when one cannot be, recovery's entries
    floods    refusals that never reached a plan: the first per caller, code and minute, then a count  (pure)
    display   reading them: ``audit list``'s filters and table

The write tool (gateway.write.planned) decides what an entry says; this package decides how it is kept and shown.
"""
