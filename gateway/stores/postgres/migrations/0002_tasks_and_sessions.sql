-- MCP tasks (url-mode writes a client follows as tasks) and approver sessions (people signed in on the approval
-- page), both kept until they expire. gateway/stores/postgres.py says how each is used.

CREATE TABLE tasks (
    task_id text PRIMARY KEY,
    caller text NOT NULL,
    key text NOT NULL,
    tool text NOT NULL,
    status text NOT NULL,
    body text NOT NULL,
    rev integer NOT NULL,
    created_at double precision NOT NULL,
    expires_at double precision NOT NULL
);
CREATE INDEX tasks_key ON tasks (caller, key);
CREATE INDEX tasks_live ON tasks (expires_at) WHERE status NOT IN ('completed', 'failed', 'cancelled');

CREATE TABLE approver_sessions (
    session_id text PRIMARY KEY,
    person text NOT NULL,
    body text NOT NULL,
    created_at double precision NOT NULL,
    expires_at double precision NOT NULL
);
CREATE INDEX approver_sessions_expiry ON approver_sessions (expires_at);
