-- Job alerts (docs/alerts.md): saved searches that mail the new jobs they match. New tables only, written as
-- schema.sql writes them, so that a database of any age gets them at this step.
-- A person's saved search: `jobs.search`'s parameters, and how often it mails; `last_sent_at` is the last
-- digest's time. Only a hash of the one-click unsubscribe token is kept.
CREATE TABLE IF NOT EXISTS job_alerts (
    id                uuid           NOT NULL,
    user_id           uuid           NOT NULL,
    q                 text,
    location          text,
    company           text,
    employment_type   text[],
    frequency         text           NOT NULL,
    unsubscribe_hash  bytea          NOT NULL,
    created_at        timestamptz(0) NOT NULL DEFAULT now(),
    last_sent_at      timestamptz,
    CONSTRAINT job_alerts_pkey PRIMARY KEY (id),
    CONSTRAINT job_alerts_unsubscribe_key UNIQUE (unsubscribe_hash),
    CONSTRAINT job_alerts_user_fkey FOREIGN KEY (user_id) REFERENCES users (id) ON DELETE CASCADE,
    CONSTRAINT job_alerts_frequency_check CHECK (frequency IN ('instant', 'daily'))
);
-- A person's alerts, oldest first (alerts.list, the panel's page, the limit of 20).
CREATE INDEX IF NOT EXISTS job_alerts_user_idx ON job_alerts (user_id, created_at, id);
-- The alerts created lately: each worker's alert index reads them as they come.
CREATE INDEX IF NOT EXISTS job_alerts_created_idx ON job_alerts (created_at);

-- Each job an alert matched, once: the key is what makes "never twice for one alert" hold. `sent_at` is set
-- when the alert's mail takes it (or drops it: closed meanwhile, or the person cannot be mailed). Written at
-- ~16,000 rows a second at scale (docs/alerts.md), so without foreign keys, whose checks cost a statement a
-- row: rows are written only for alerts that exist, go with their alert (the trigger below), and a job's rows
-- are read joined with the job.
CREATE TABLE IF NOT EXISTS job_alert_matches (
    alert_id    uuid        NOT NULL,
    job_id      uuid        NOT NULL,
    matched_at  timestamptz NOT NULL DEFAULT now(),
    sent_at     timestamptz,
    CONSTRAINT job_alert_matches_pkey PRIMARY KEY (alert_id, job_id)
);
-- An alert's waiting matches, without reading those it mailed long ago.
CREATE INDEX IF NOT EXISTS job_alert_matches_waiting_idx ON job_alert_matches (alert_id) WHERE sent_at IS NULL;

-- The alerts whose matches wait to be mailed, and from when: the first match plus ALERT_INSTANT_SECONDS, or the
-- last digest plus ALERT_DIGEST_SECONDS. A row of its own, so that the busiest write of matching inserts a
-- narrow row rather than updating the alert's.
CREATE TABLE IF NOT EXISTS job_alert_due (
    alert_id    uuid        NOT NULL,
    frequency   text        NOT NULL,
    due_at      timestamptz NOT NULL,
    CONSTRAINT job_alert_due_pkey PRIMARY KEY (alert_id),
    CONSTRAINT job_alert_due_alert_fkey FOREIGN KEY (alert_id) REFERENCES job_alerts (id) ON DELETE CASCADE,
    CONSTRAINT job_alert_due_frequency_check CHECK (frequency IN ('instant', 'daily'))
);
-- Due first, instant ones before digests.
CREATE INDEX IF NOT EXISTS job_alert_due_idx ON job_alert_due (frequency, due_at);

-- An alert's matches go with it, however it goes (alerts.delete, the unsubscribe link, erasure, an account).
CREATE OR REPLACE FUNCTION job_alerts_forget_matches() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM job_alert_matches WHERE alert_id IN (SELECT id FROM gone);
    RETURN NULL;
END
$$;
CREATE OR REPLACE TRIGGER job_alerts_forget_matches AFTER DELETE ON job_alerts
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION job_alerts_forget_matches();

-- How far the published set's versions have been matched against the alerts: advanced in the transaction
-- that writes the matches, so a publish committed is matched once whatever process dies when. `matched_at`
-- is when: should the log of changes no longer reach back to `version`, the jobs published since are matched.
CREATE TABLE IF NOT EXISTS job_alert_cursor (
    singleton   boolean     NOT NULL DEFAULT true,
    version     bigint      NOT NULL,
    matched_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT job_alert_cursor_pkey PRIMARY KEY (singleton),
    CONSTRAINT job_alert_cursor_singleton_check CHECK (singleton)
);
INSERT INTO job_alert_cursor (version)
SELECT coalesce((SELECT version FROM job_totals WHERE status = 'published'), 0)
ON CONFLICT DO NOTHING;
