"""The published tools, one module per kind, in the order a write flows through them.

listing      a read tool: one bounded page of a backend list, with an opaque cursor
preview      a preview tool: reads the target, computes the effect, issues a caller-bound plan
write        a write tool: the I/O of the write path, step by step
write_rules  the write path's decisions, pure (the step table is at its top)
confirm      asking the user, in both protocol eras
"""
