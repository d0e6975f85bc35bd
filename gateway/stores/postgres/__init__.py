"""The PostgreSQL store: several gateway replicas keep plans, keys, locks, nonces, buckets, approvals, approver
sessions, tasks and the audit in one database, the one an operator already backs up, replicates and queries.

    store       PostgresStore: the role classes below composed into one Store, plus serve_from and close
    keys        plans, idempotency keys, nonces, leased locks: the claim, release and settle transactions
    leases      the locks' acquire, renew and unlock statements (the loop around them: gateway/stores/leases.py)
    audit       the hash-chained audit table and its one tail
    counters    rate-limit buckets on the database's clock and the counted writes
    page_state  approvals, MCP tasks, approver sessions
    passkeys    approvers' enrolled WebAuthn credentials
    pool        the connection pool every role shares, one transaction or statement per step, failing closed
    url         the store URL: our parameters and libpq's, the password from the environment
    schema      ``migrate`` and the schema-version check ``serve`` and ``check`` ask first
    migrations/ the versioned SQL files ``migrate`` applies (package data, shipped in the wheel); a shipped one
                is never edited, so their comments still call this package gateway/stores/postgres.py

Adding a role: its protocol in gateway/stores/base.py, its tables in a new migration (never an edit to a shipped
one), one module here with a class on ``PostgresPool``, and that class among ``PostgresStore``'s bases. Imported by
gateway.stores.open_store, and ``schema`` and ``url`` by ``migrate``, ``check`` and ``serve`` (gateway.cli) and by
tests; imports the shared pieces of gateway.stores (base, codec, leases), records, the audit chain and crashpoints.
This module imports nothing, so that ``url`` and ``schema`` are read without the pool: the store is
``store.PostgresStore``.

``store = "postgresql://gateway@db.internal:5432/gateway?sslmode=verify-full&sslrootcert=/etc/ssl/db-ca.pem"``;
gateway/stores/postgres/url.py says which parameters are ours and which libpq's, and why the config never holds
the password. The tables live in the URL's ``schema`` (default ``gateway``), made and upgraded by
``mcp-safety-gateway migrate`` (gateway/stores/postgres/schema.py, migrations in postgres/migrations/); ``serve``
and ``check`` refuse a database whose schema version is not this gateway's. Driver: psycopg 3 with its pool
(chosen over asyncpg by bench/pgdriver.py; docs/deployment.md says why). Records are JSON text written and read
by the codec every store shares (gateway/stores/codec.py), beside plain columns an operator can query.

Tables, in the schema::

    plans              plan_id -> caller, tool, target, body, in_use_by, expires_at, purge_at   (the tombstone hour)
    idempotency        (caller, key) -> plan_id, target, tool, state, owner, body, claimed_at, settled_at, purge_at
    nonces             nonce -> purge_at               single use of a 2026 confirmation state within its TTL
    locks              target -> token, fence, expires_at   leases on the database's clock; rows are kept, the
                                                       fence only grows
    buckets            name -> tokens, updated, wait, purge_at   rate limits, on the database's clock; UNLOGGED
                                                       (no WAL, no fsync; a server crash leaves them full)
    writes             (scope, at), one row per write  blast-radius counters; rows older than a day purged
    approvals          approval_id -> plan_id, caller, tool, target, body, rev, requested_at, expires_at, purge_at
    tasks              task_id -> caller, key, tool, status, body, rev, created_at, expires_at   MCP tasks
    approver_sessions  session_id -> person, body, created_at, expires_at   people signed in on the approval page
    audit              seq -> at, caller, tool, outcome, code, target, plan_id, idempotency_key, entry
    audit_tail         one row, locked by each append: the chain has one tail at a time
    schema_migrations  version -> name, applied_at    (schema.py)

and the views ``audit_log``, ``approval_decisions``, ``unknown_writes`` and ``keys_now`` for operators
(docs/deployment.md shows the queries). ``entry`` is the sealed AuditEntry as the chain hashed it; ``audit verify``
reads only that column, so the plain columns beside it are conveniences, never evidence.

Atomic (each one transaction, READ COMMITTED with row locks, always taken key row first, then plan row, then
the audit tail, so two transactions never wait for each other in a cycle):

- ``claim``: lock the key's row, check the holder's lock is still its own (the fence), lock the plan's row,
  refuse (gateway.stores.base.claim_refusal) or insert the key in flight with its owner token and mark the plan
  in use. A concurrent insert of the same key loses on the primary key and answers with the winner's record.
- ``settle`` with its audit entry: lock the key, lock the audit tail, insert the sealed entry, record the outcome,
  delete the plan: one commit. The outcome and its entry are durable together or not at all (crash point
  ``mid-settle``: after the insert, before the commit). A settle retried after a lost commit reply finds its
  own outcome and stores neither again.
- ``release``, ``consume_plan``, ``append_audit``, ``trim_audit`` (the delete and its checkpoint), approvals'
  and tasks' compare-and-set on ``rev`` (a task's only from a status TASK_TRANSITIONS lets its new one follow,
  ``task_leaves``, in the same statement); ``create_task`` (a transaction-scoped advisory lock on the caller's key,
  then a look for its live task, then the insert, so two replicas never make two tasks for one key); a bucket's
  refill-and-take, a nonce's first use and a lock's acquire are one statement each (``INSERT ... ON CONFLICT DO
  UPDATE ... WHERE``).

Each step that changes a key reads its stored state in the same transaction and changes it only as
KEY_TRANSITIONS (gateway.records) allows (gateway.stores.base.key_moves); anything else leaves the key as it was.

Locks, leases and fencing: exactly as the Redis store (the loop is gateway/stores/leases.py), with a row per
target. A claim records its owner token; while the owner holds the lock the key reads in flight; once the lock
lapsed or another holder took it, the next read settles the key ``unknown`` (and deletes its plan), and a late
settle by the old owner cannot overwrite that. ``recover_in_flight`` at start-up applies the same rule to every
key (``FOR UPDATE SKIP LOCKED``, so replicas starting together do not queue): the other replicas keep running.

Durability is PostgreSQL's: a commit is on the server's disk (and on synchronous standbys, if the operator
configured them) before the backend is called. Taking and freeing a lock commit without waiting for the disk
(gateway/stores/postgres/leases.py says why that is safe), and the buckets are unlogged. Guarantee: one key
never reaches the backend twice.

How it fails. Every operation runs within ``timeout`` (5 s by default: waiting for a pooled connection, and the
server's ``statement_timeout``); a server that is down, restarting, unreachable or stalled, or a connection that
dropped, raises StoreUnavailable, which the write path turns into ``backend_unavailable`` before the claim
(nothing sent). After the claim the backend call does not need the database; an outcome it cannot record is kept
(gateway.write.unsettled) and the caller told the truth, and the next write call on this process stores it: the
store remembers the claims it made until they are settled or released, so the kept outcome settles its own
claim even though its lock is gone by then (an orphaned key is unknown by then, and KEY_TRANSITIONS refuses any
other outcome over it). A process that dies with an outcome kept leaves the key in flight, which reads
``unknown`` once its lock lapses. A pooled connection idle for more than a second is checked
(one round trip) before use, so a restarted server costs no failed call, and one in steady use is not. A claim
whose commit reply was lost is refused to its caller and reads ``unknown`` later: nothing was sent, but the
gateway cannot know that.
"""
