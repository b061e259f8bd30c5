-- Disabling endpoints that always fail (issue 26): when the failures began and when it was disabled; emit() now
-- also finds disabled endpoints (their events are kept as failed deliveries), so the partial index goes.
-- The new indexes (all of the account's endpoints, the failing ones, events by account) are in schema.sql.
ALTER TABLE webhook_endpoints ADD COLUMN IF NOT EXISTS failing_since timestamptz;
ALTER TABLE webhook_endpoints ADD COLUMN IF NOT EXISTS disabled_at timestamptz(0);
DROP INDEX IF EXISTS webhook_endpoints_account_idx;
-- "Redelivered already?" now has an index of its own (event, endpoint, time), which covers this one.
DROP INDEX IF EXISTS webhook_deliveries_event_idx;
