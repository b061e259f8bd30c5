-- The hiring desk's candidate path (issue 33): a mailed sign-up or reset link keeps the page of this site the
-- person began on (the job they were applying to), where signing in goes on to once it is followed. (A database
-- older than email_links gets the table, with the column, from schema.sql.)
ALTER TABLE IF EXISTS email_links ADD COLUMN IF NOT EXISTS next_path text;
ALTER TABLE IF EXISTS email_links DROP CONSTRAINT IF EXISTS email_links_next_path_check;
ALTER TABLE IF EXISTS email_links ADD CONSTRAINT email_links_next_path_check
    CHECK (next_path IS NULL OR (next_path LIKE '/%' AND length(next_path) <= 2000));
