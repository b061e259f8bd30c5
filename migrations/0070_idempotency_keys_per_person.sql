-- Idempotency-Keys of procedures about one person (`profile.*`) are kept per person, and every key records who
-- called, so that erasing a member deletes only that member's keys (docs/security.md). (A database older than
-- idempotency_keys gets the table from schema.sql.)
ALTER TABLE IF EXISTS idempotency_keys ADD COLUMN IF NOT EXISTS scope text NOT NULL DEFAULT '';
ALTER TABLE IF EXISTS idempotency_keys ADD COLUMN IF NOT EXISTS user_id uuid;
ALTER TABLE IF EXISTS idempotency_keys DROP CONSTRAINT IF EXISTS idempotency_keys_pkey;
ALTER TABLE IF EXISTS idempotency_keys ADD CONSTRAINT idempotency_keys_pkey PRIMARY KEY (account_id, scope, key);
