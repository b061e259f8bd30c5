-- A verification link keeps the password hash of the sign-up it was sent for (docs/security.md): a second
-- sign-up with the same unverified address no longer replaces the first one's password. (A database older than
-- email_links gets the table, with the column, from schema.sql.)
ALTER TABLE IF EXISTS email_links ADD COLUMN IF NOT EXISTS password_hash text;
ALTER TABLE IF EXISTS email_links DROP CONSTRAINT IF EXISTS email_links_password_check;
ALTER TABLE IF EXISTS email_links ADD CONSTRAINT email_links_password_check
    CHECK (password_hash IS NULL OR purpose = 'verify');
