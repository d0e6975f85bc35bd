-- The PostgreSQL store's tables (gateway/stores/postgres.py says how each is used), in the schema named by the
-- store URL (search_path is set to it). Times are seconds since the epoch as the gateway's clock gave them,
-- except the lock leases, which run on the database's own clock. The views turn them into timestamps.

CREATE TABLE plans (
    plan_id text PRIMARY KEY,
    caller text NOT NULL,
    tool text NOT NULL,
    target text NOT NULL,
    body text NOT NULL,
    in_use_by text,
    expires_at double precision NOT NULL,
    purge_at double precision NOT NULL
);
CREATE INDEX plans_purge ON plans (purge_at);

CREATE TABLE idempotency (
    caller text NOT NULL,
    key text NOT NULL,
    plan_id text NOT NULL,
    target text NOT NULL,
    tool text,
    state text NOT NULL CHECK (state IN ('in_flight', 'applied', 'unknown', 'error')),
    owner text NOT NULL DEFAULT '',
    body text NOT NULL,
    claimed_at double precision NOT NULL,
    settled_at double precision,
    purge_at double precision NOT NULL,
    PRIMARY KEY (caller, key)
);
CREATE INDEX idempotency_purge ON idempotency (purge_at) WHERE state <> 'in_flight';
CREATE INDEX idempotency_in_flight ON idempotency (target) WHERE state = 'in_flight';

CREATE TABLE nonces (
    nonce text PRIMARY KEY,
    purge_at double precision NOT NULL
);
CREATE INDEX nonces_purge ON nonces (purge_at);

CREATE TABLE locks (
    target text PRIMARY KEY,
    token text NOT NULL,
    fence bigint NOT NULL,
    expires_at timestamptz NOT NULL
);

-- Unlogged: a rate-limit bucket is not worth a WAL write and an fsync on every call (all of one caller's calls
-- update its one row); a server crash empties the table, which leaves every bucket full.
CREATE UNLOGGED TABLE buckets (
    name text PRIMARY KEY,
    tokens double precision NOT NULL,
    updated double precision NOT NULL,
    wait double precision NOT NULL,
    purge_at double precision NOT NULL
);
CREATE INDEX buckets_purge ON buckets (purge_at);

CREATE TABLE writes (
    scope text NOT NULL,
    at double precision NOT NULL
);
CREATE INDEX writes_scope ON writes (scope, at);

CREATE TABLE approvals (
    approval_id text PRIMARY KEY,
    plan_id text NOT NULL,
    caller text NOT NULL,
    tool text NOT NULL,
    target text NOT NULL,
    body text NOT NULL,
    rev integer NOT NULL,
    requested_at double precision NOT NULL,
    expires_at double precision NOT NULL,
    purge_at double precision NOT NULL
);
CREATE INDEX approvals_expiry ON approvals (expires_at);
CREATE INDEX approvals_purge ON approvals (purge_at);

CREATE TABLE audit (
    seq bigint PRIMARY KEY,
    at double precision NOT NULL,
    caller text NOT NULL,
    tool text NOT NULL,
    outcome text NOT NULL,
    code text,
    target text,
    plan_id text,
    idempotency_key text,
    entry text NOT NULL
);
CREATE INDEX audit_at ON audit (at);
CREATE INDEX audit_key ON audit (caller, idempotency_key);
CREATE INDEX audit_target ON audit (target, seq);

-- One row, locked by every append and trim: the chain has one tail at a time.
CREATE TABLE audit_tail (one boolean PRIMARY KEY DEFAULT true CHECK (one));
INSERT INTO audit_tail VALUES (true);

-- For operators: the audit as timestamps and JSON.
CREATE VIEW audit_log AS
SELECT seq,
       to_timestamp(at) AS at,
       caller,
       tool,
       outcome,
       code,
       target,
       plan_id,
       idempotency_key,
       (entry::json) -> 'version_before' AS version_before,
       (entry::json) -> 'version_after' AS version_after,
       (entry::json) ->> 'confirmation' AS confirmation,
       (entry::json) -> 'extra' AS extra
FROM audit;

-- Who approved (or rejected) what on the approval page: one row per decision, from the audit.
CREATE VIEW approval_decisions AS
SELECT seq,
       to_timestamp(at) AS at,
       (entry::json) -> 'extra' ->> 'approval' AS approval_id,
       (entry::json) -> 'extra' ->> 'approver' AS approver,
       (entry::json) ->> 'confirmation' AS verdict,
       caller AS requested_by,
       tool,
       target,
       plan_id,
       (entry::json) -> 'version_before' AS version
FROM audit
WHERE outcome = 'approval';

-- Which writes have an unknown outcome: each key the first time it was recorded unknown (its write may or may
-- not have reached the backend; read the target to find out).
CREATE VIEW unknown_writes AS
SELECT DISTINCT ON (caller, idempotency_key)
       seq,
       to_timestamp(at) AS at,
       caller,
       idempotency_key,
       tool,
       target,
       plan_id,
       (entry::json) -> 'version_before' AS version_before,
       (entry::json) -> 'extra' AS extra
FROM audit
WHERE outcome = 'unknown' AND idempotency_key IS NOT NULL
ORDER BY caller, idempotency_key, seq;

-- The idempotency keys as they stand now (kept for the configured retention).
CREATE VIEW keys_now AS
SELECT caller,
       key,
       state,
       tool,
       target,
       plan_id,
       to_timestamp(claimed_at) AS claimed_at,
       to_timestamp(settled_at) AS settled_at,
       (body::json) -> 'result' AS result
FROM idempotency;
