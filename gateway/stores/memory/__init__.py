"""The in-memory store: TTL maps in one process. For tests and throwaway runs; lost on exit.

    store       MemoryStore: the role classes below composed into one Store, plus serve_from and close
    keys        plans, idempotency keys, nonces, per-target locks: the claim, release and settle
    audit       the hash-chained audit, a list
    counters    rate-limit buckets and the counted writes
    page_state  approvals, MCP tasks, approver sessions
    passkeys    approvers' enrolled WebAuthn credentials
    maps        what every role shares: the chain's keys, the audit list, maps whose entries expire

Atomic: an operation has no ``await`` between its read and its write, so nothing else runs in between (one event
loop). A settle appends its audit entry and records the outcome in one such step. A key changes only as
KEY_TRANSITIONS allows (gateway.stores.base.key_moves), a task only as TASK_TRANSITIONS does (task_moves).

Laid out like the other stores so that adding a role is the same everywhere: its protocol in
gateway/stores/base.py, one module here with a class on ``MemoryMaps``, and that class among ``MemoryStore``'s
bases. Imported by gateway.stores.open_store (and by tests); imports the shared pieces of gateway.stores (base,
buckets, locks), records and the audit chain. This module imports nothing: the store is ``store.MemoryStore``.
"""
