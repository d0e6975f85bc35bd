-- The rows each counted write touches (a statement tool's measured count; 0 for other writes), which the approval
-- rules read as ``rows`` budgets beside the ``writes`` counts. gateway/stores/postgres/counters.py sums them.

ALTER TABLE writes ADD COLUMN rows bigint NOT NULL DEFAULT 0;
