-- The recruiting loop (issue 32): a job's scorecard attributes, a member's choice of new-application mail, and
-- the number a person's calendar feed address is derived from. The loop's own tables (interviews, scorecards,
-- offers) arrive with schema.sql.
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS scorecard_attributes text[] NOT NULL DEFAULT '{}';
ALTER TABLE jobs DROP CONSTRAINT IF EXISTS jobs_scorecard_attributes_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_scorecard_attributes_check CHECK (cardinality(scorecard_attributes) <= 20);
ALTER TABLE users ADD COLUMN IF NOT EXISTS notify_new_applications boolean NOT NULL DEFAULT true;
ALTER TABLE users ADD COLUMN IF NOT EXISTS calendar_epoch integer NOT NULL DEFAULT 0;
