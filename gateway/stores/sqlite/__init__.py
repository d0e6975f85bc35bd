"""The default store: one SQLite file in WAL mode that survives a restart, served by one process at a time.

    store       SqliteStore: the role classes below composed into one Store, plus serve_from and close
    keys        plans, idempotency keys, nonces, per-target locks: the atomic claim, release and settle
    audit       the hash-chained audit: append, trim, read in order
    counters    rate-limit buckets (in this process) and the counted writes
    page_state  approvals, MCP tasks, approver sessions: what the approval page and the task methods keep
    passkeys    approvers' enrolled WebAuthn credentials
    file        the file every role shares: its two connections, the worker threads, one transaction per step
    schema      the tables, made (and columns added) when the file is opened

Adding a role: its protocol in gateway/stores/base.py, its tables in ``schema``, one module here with a class on
``SqliteFile``, and that class among ``SqliteStore``'s bases. Imported by gateway.stores.open_store only (and by
tests); imports the shared pieces of gateway.stores (base, codec, buckets, locks, serving), records, the audit
chain and crashpoints. This module imports nothing: the store is ``store.SqliteStore``.

Tables, in one file (``journal_mode=WAL``, ``synchronous=FULL``)::

    plans        plan_id -> body, in_use_by (the key that claimed it), purge_at    expiry + the tombstone hour
    idempotency  (caller, key) -> plan_id, target, state, result, tool, version_before, purge_at
    nonces       nonce -> purge_at                       single use of a 2026 confirmation state within its TTL
    audit        id -> entry                             the chain (gateway.audit.chain), in append order
    approvals    approval_id -> body, rev, expires_at, requested_at, purge_at   the approval page's writes waiting
    writes       (scope, at, rows), one row per write    blast-radius counters; rows older than a day purged
    tasks        task_id -> body, caller, key, status, rev, expires_at     MCP tasks; purged once expired
    sessions     session_id -> body, created_at, expires_at   approvers signed in on the page; purged once expired

Off the event loop. ``synchronous=FULL`` makes every commit an fsync, which must not stall every other request,
so SQLite runs in worker threads: one connection that writes, one that reads, each used by one thread at a time
(an ``anyio`` capacity limiter of 1 per connection). Each store operation is one function run there in one
call; a transaction never spans two. WAL lets the reader run beside a writer's fsync. Rate buckets and
per-target locks are in memory, so taking a token never leaves the loop.

Atomic (each one ``BEGIN IMMEDIATE`` transaction on the writer):

- ``claim``: purge lapsed keys, read the key and the plan, refuse (gateway.stores.base.claim_refusal) or insert
  the key in flight and mark the plan in use;
- ``settle`` with its audit entry: read the chain's tail, insert the sealed entry, record the outcome under the
  key, delete the plan: one commit, one fsync. The outcome and its entry are on disk together or not at all.
- ``consume_plan`` (a declined prompt): delete the plan only while no key has claimed it;
- ``append_audit`` and ``trim_audit``: the read of the tail and the insert (or the delete and the checkpoint);
- ``create_task``: look for a live task of the same (caller, key), else insert; ``replace_approval``: an update
  only at the revision read; ``replace_task``: the same, once the stored status was read and TASK_TRANSITIONS lets
  the new one follow it (gateway.stores.base.task_moves).

Each step that changes a key reads its stored state in the same transaction and changes it only as
KEY_TRANSITIONS (gateway.records) allows (gateway.stores.base.key_moves); anything else leaves the key as it was.

Fenced. One ``serve`` process per file (gateway/stores/serving.py holds an exclusive lock the kernel drops when
the process dies), so the per-target locks, which live in that process, order every write to a target, and
everything in flight at start-up was left by a crash. ``check`` and ``audit`` open the file too; they only
read, or write in a transaction of their own (``audit trim``).

Guaranteed. A claim is on disk before the backend is called. A crash before the settle's commit leaves the key
in flight with no outcome entry; the next ``serve`` settles it ``unknown`` and audits it (gateway.audit.trail),
so a write that may have reached the backend always has exactly one entry saying what is known.

How it fails. Another connection holding the write lock (``audit trim`` during a burst) is waited for up to
``busy_timeout`` (5 s); then, and on a full disk or an unreadable file, the operation raises
``sqlite3.Error`` and its transaction is rolled back, leaving the file as it was.
"""
