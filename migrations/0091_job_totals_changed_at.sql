-- The public feed and sitemap answer Last-Modified with the time the published set last changed, which the
-- jobs triggers of schema.sql keep beside its version.
ALTER TABLE job_totals ADD COLUMN IF NOT EXISTS changed_at timestamptz(0) NOT NULL DEFAULT now();
