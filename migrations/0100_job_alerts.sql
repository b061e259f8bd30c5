-- Job alerts (docs/alerts.md): saved searches that mail the new jobs they match. New tables only, written as
-- schema.sql writes them, so that a database of any age gets them at this step.

-- A person's saved search: `jobs.search`'s parameters, and how often it mails. `due_at` is set when a match waits to be mailed (the first match plus
-- ALERT_INSTANT_SECONDS, or the last digest plus ALERT_DIGEST_SECONDS). Only a hash of the one-click
-- unsubscribe token is kept.
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
    due_at            timestamptz,
    CONSTRAINT job_alerts_pkey PRIMARY KEY (id),
    CONSTRAINT job_alerts_unsubscribe_key UNIQUE (unsubscribe_hash),
    CONSTRAINT job_alerts_user_fkey FOREIGN KEY (user_id) REFERENCES users (id) ON DELETE CASCADE,
    CONSTRAINT job_alerts_frequency_check CHECK (frequency IN ('instant', 'daily'))
);
-- A person's alerts, oldest first (alerts.list, the panel's page, the limit of 20).
CREATE INDEX IF NOT EXISTS job_alerts_user_idx ON job_alerts (user_id, created_at, id);
-- The alerts created lately: each worker's alert index reads them as they come.
CREATE INDEX IF NOT EXISTS job_alerts_created_idx ON job_alerts (created_at);
-- The alerts whose mail is due.
CREATE INDEX IF NOT EXISTS job_alerts_due_idx ON job_alerts (due_at) WHERE due_at IS NOT NULL;

-- Each job an alert matched, once: the key is what makes "never twice for one alert" hold. `sent_at` is set
-- when the alert's mail takes it (or drops it: closed meanwhile, or the person cannot be mailed).
CREATE TABLE IF NOT EXISTS job_alert_matches (
    alert_id    uuid        NOT NULL,
    job_id      uuid        NOT NULL,
    matched_at  timestamptz NOT NULL DEFAULT now(),
    sent_at     timestamptz,
    CONSTRAINT job_alert_matches_pkey PRIMARY KEY (alert_id, job_id),
    CONSTRAINT job_alert_matches_alert_fkey FOREIGN KEY (alert_id) REFERENCES job_alerts (id) ON DELETE CASCADE,
    CONSTRAINT job_alert_matches_job_fkey FOREIGN KEY (job_id) REFERENCES jobs (id) ON DELETE CASCADE
);
CREATE INDEX IF NOT EXISTS job_alert_matches_job_idx ON job_alert_matches (job_id);

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

