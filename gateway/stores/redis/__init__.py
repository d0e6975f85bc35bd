"""The shared store: several gateway replicas keep plans, keys, nonces, locks and the audit in one Redis.

    store       RedisStore: the role classes below composed into one Store, plus serve_from and close
    keys        plans, idempotency keys, nonces, leased locks: the claim, release, settle and orphan scripts
    audit       the hash-chained audit list: append and trim under WATCH, read in pages
    counters    rate-limit buckets (a script on Redis's clock) and the counted writes
    page_state  approvals, MCP tasks, approver sessions, each with its expiry index
    passkeys    approvers' enrolled WebAuthn credentials and their index
    leases      the locks' acquire, renew and unlock scripts (the loop around them: gateway/stores/leases.py)
    client      the connection every role shares (one primary, or Sentinel's), its scripts, failing closed
    url         the store URL: our parameters and redis-py's, the password from the environment

Adding a role: its protocol in gateway/stores/base.py, one module here with a class on ``RedisClient`` (its key
families listed below), and that class among ``RedisStore``'s bases. Imported by gateway.stores.open_store (and
``url`` by tests); imports the shared pieces of gateway.stores (base, codec, leases), records and the audit chain.
This module imports no driver, so that ``url`` is read without it: the store is ``store.RedisStore``, imported
under ``loading_the_driver``.

``store = "redis://[user:password@]host:6379/0?lock_lease=60&prefix=gateway:"`` (``rediss://`` for TLS), or
``redis+sentinel://h1:26379,h2:26379,h3:26379/SERVICE/0?...``; gateway/stores/redis/url.py says which query
parameters are ours and which redis-py's. Use one Redis primary (standalone, or failed over by Sentinel), not
Redis Cluster: a claim's script touches several keys. Records are JSON written and read by the one codec of
every store (gateway/stores/codec.py: unknown fields dropped, so replicas of two versions share records).

Keys, under ``prefix``::

    plan:<planId>          hash    body, expires_at, in_use_by       expires an hour after the plan (tombstone)
    key:<caller>:<key>     hash    body, state, owner                expires after the retention
    nonce:<nonce>          string                                    SET NX PX: single use within its TTL
    lock:<target>          string  "<fence>:<random>" of the holder  SET PX lease, renewed while held
    fence:<target>         integer                                   INCR on every acquire, never reset
    audit                  list    one AuditEntry JSON per decision  RPUSH; trim: LTRIM + checkpoint, one MULTI
    approval:<id>          hash    body, rev                         expires an hour after the plan would
    approvals              zset    approval ids by expiry            the approval page's list; trimmed on read
    writes:<scope>         zset    one member per write, by time     blast-radius counters; trimmed to a day
    task:<id>              hash    body, rev, status                 an MCP task; expires with the task
    taskkey:<caller>:<key> string  the task id of a live task        SET with the task (create_task's script)
    tasks                  zset    task ids by expiry                what a gateway resumes; trimmed on read
    session:<id>           string  an ApproverSession's JSON         SET PX: expires with the session
    sessions               zset    session keys by expiry            the operator's list; trimmed on read
    passkey:<credential>   hash    body, rev                         an enrolled passkey; kept, revoked too
    passkeys               zset    passkey keys by enrolment time    the operator's list
    bucket:<name>          hash    tokens, updated                   a rate-limit bucket (Lua, Redis's clock);
                                                                     expires once it would be full again

Atomicity. Each decision that reads and writes is one Lua script, which Redis runs without interleaving:
``claim`` checks the key record, the holder's lock and the plan (live, not in use), then inserts the record in
flight and marks the plan in use, exactly like the SQLite transaction; ``release``, ``settle``,
``consume_plan`` (delete a plan only while no key holds it), ``create_task`` (only while no live task holds the
caller's key), ``replace`` (an approval, only at the revision read), ``replace_task`` (the same, and only from a
status TASK_TRANSITIONS lets the new one follow: it is passed ``task_leaves``), ``put_passkey`` (once per
credential), ``replace_passkey`` (at the revision read), acquire, renew and unlock are
scripts too. A script retried after a lost reply recognises its own earlier effect. The scripts that change a
key's state (claim, release, settle, orphan) change it only from the states KEY_TRANSITIONS (gateway.records) lets
their event leave, which they are passed (``absent``: no record); anything else leaves the key as it was.

Locks, leases and fencing. ``lock(target)`` sets the target's lock key only if it is absent, with a lease and
a token: the target's fence (a counter incremented on every acquire, so a token is never issued twice) and a
random part. Waiters poll with a short backoff. A background task renews the lease every third of it while the
body runs; unlock deletes the key only if the token is still the holder's (the loop around these scripts is
gateway/stores/leases.py, shared with PostgreSQL). The token is remembered for the task (a context variable); a
token that is no longer the lock's value is a stale fence, and:

- ``claim`` refuses unless the lock is still held with that token. A holder that stalled past its lease (and
  so may have been overtaken by another replica) gets ``request_in_progress`` and writes nothing.
- A claimed key records its owner token. While the owner holds the lock, the key reads as in flight. Once the
  lock is gone or held by someone else while the key is still in flight, the owner died or stalled mid-write:
  the next read settles the key as ``unknown`` (and deletes the plan), so the caller gets ``outcome_unknown``
  and the key never writes again.
- ``settle`` records an outcome only over the owner's own in-flight record; a stalled owner that wakes up
  after its key was declared unknown cannot overwrite that. The store remembers the claims it made (their
  tokens) until they are settled or released, so an outcome the store could not take at once (kept by
  gateway.write.unsettled) settles its own claim when a later call stores it, its lock gone by then, unless a read
  found the key orphaned first. When the entry was stored and the key's outcome was not, ``settle`` raises
  OutcomeNotRecorded: the outcome is kept without its entry, which is never stored twice.
- ``recover_in_flight`` at start-up applies the same rule to every key. It cannot settle everything in flight
  as SQLite does: the other replicas are still running.

Replication. A claim is followed on the same connection by ``WAIT min_replicas replica_wait`` (1 replica by
default with Sentinel): a claim no replica acknowledged in time is released and the call refused, so a failover
to a replica cannot lose a claim whose write was then sent. Settles and audit entries are not waited for: one
lost in a failover leaves the key in flight, which reads ``unknown`` once its lock lapses.

Guarantee: one key never reaches the backend twice (the claim is atomic, replicated before the call, and a
claimed key never returns to free unless its call was never sent). For one target, writes through gateways are
serialised by the lock and the version re-check under it, as long as a holder's write finishes while it holds
the lease: a live holder renews it, and the lease (default 60 s) must exceed the longest write timeout by more
than 5 s (``check`` and ``serve`` refuse a config where it does not), so that the write of a holder that died
mid-call has landed or failed before another replica can take the target. The store cannot
stop a write already sent: the legacy backend takes no fence token, so a holder stalled between its claim and
its backend call for longer than the lease could still race the next holder. Durability is Redis's: use AOF
(docs/deployment.md) or a restart forgets keys.

Connection loss fails closed: every operation raises StoreUnavailable, which the write path turns into a
refusal before anything is sent; redis-py reconnects on the next call. A Redis that stops answering with its
connections open (paused) fails the same way within ``socket_timeout`` times ``1 + retries`` (1 s and 2 by
default). Lock release and renewal never raise. The audit entry of a write's outcome is appended just before its
settle (a Lua script cannot compute the chain's HMAC), so a crash in between leaves the entry and a key in
flight that later reads ``unknown``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

METRICS_SDK = "opentelemetry.sdk.metrics"


@contextmanager
def loading_the_driver() -> Iterator[None]:
    """Import redis-py here without OpenTelemetry's metrics SDK. redis-py 8 imports that SDK whenever it is
    installed (it is, for the gateway's traces), for client metrics it records only once someone calls its
    ``observability`` setup, which the gateway never does: 1.4 MiB and ~50 ms per process for nothing
    (bench/RESULTS.md, "Memory: what a worker holds"). While the block runs the SDK reads as not installed, as
    redis-py allows for; it is importable again afterwards, so traces and anything else that wants it are
    untouched."""
    if METRICS_SDK in sys.modules or "redis" in sys.modules:
        yield
        return
    sys.modules[METRICS_SDK] = None  # type: ignore[assignment]  # an import of it raises ImportError
    try:
        yield
    finally:
        if sys.modules.get(METRICS_SDK, ...) is None:
            del sys.modules[METRICS_SDK]
