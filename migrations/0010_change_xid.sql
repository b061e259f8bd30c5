-- Incremental sync (jobs.changes, applications.changes): every job and application carries the id of the
-- transaction that last wrote it. Rows that exist already were all committed before this migration (it holds
-- the tables' exclusive lock), so they take position 1, before any cursor; a constant default adds the column
-- without rewriting the table. New rows and updates are stamped by schema.sql's `stamp_change` trigger.
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS change_xid xid8 NOT NULL DEFAULT '1';
ALTER TABLE jobs ALTER COLUMN change_xid SET DEFAULT pg_current_xact_id();
ALTER TABLE applications ADD COLUMN IF NOT EXISTS change_xid xid8 NOT NULL DEFAULT '1';
ALTER TABLE applications ALTER COLUMN change_xid SET DEFAULT pg_current_xact_id();
