-- A call that opens several transactions (files.upload, billing.subscriptions.create) records what it has stored
-- so far with its key, so that a retry after a failure resumes it instead of doing it twice (a second checkout).
-- (A database older than idempotency_keys gets the table from schema.sql.)
ALTER TABLE IF EXISTS idempotency_keys ADD COLUMN IF NOT EXISTS progress jsonb;
