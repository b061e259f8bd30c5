-- Caches of published jobs (jobs.list, jobs.search) are keyed by a version of the published set that the
-- jobs triggers of schema.sql bump in every transaction that changes it.
ALTER TABLE job_totals ADD COLUMN IF NOT EXISTS version bigint NOT NULL DEFAULT 0;
