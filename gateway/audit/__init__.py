"""The audit trail: one entry per decision of a write tool, in a keyed hash chain, kept by the store.

    entries   every entry, made by the constructor of its outcome; the outcomes docs/audit.md lists  (pure)
    chain     sealing an entry into the keyed chain, verifying a chain, trim checkpoints  (pure; every store)
    trail     writing entries: where one is known stored, the policy when one cannot be, recovery at start-up
    floods    refusals that never reached a plan: the first per caller, code and minute, then a count  (pure)
    sinks     streaming stored entries out to a JSONL file and a signed webhook, never blocking a call
    display   reading them: ``audit list``'s filters and table
    events    the four events of a write that waited for people, checked together by ``audit verify``  (pure)

The write path (gateway.write), the preview's choice of a mode, the approval page and the task methods learn what
an entry says and make it here; this package decides how it is kept and shown. Imported by them, the stores (which
seal with ``chain``) and the CLI; imports records, errors, config, identity, signing and text only, never a store (nor
the approvals package, which reads the audit: gateway/approvals/evidence.py).
"""
