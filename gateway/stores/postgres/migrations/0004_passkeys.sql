-- Approvers' WebAuthn credentials (passkeys), one row per credential id, kept when revoked so old signatures stay
-- checkable. gateway/stores/postgres/passkeys.py reads and replaces them at the revision read.

CREATE TABLE passkeys (
    credential_id text PRIMARY KEY,
    body text NOT NULL,
    rev integer NOT NULL,
    created_at double precision NOT NULL
);
