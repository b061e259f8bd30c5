-- A verification link keeps what its sign-up asked to be (role, display name, account name), as it keeps its
-- password (docs/security.md): an earlier sign-up with the same unverified address no longer decides the role
-- and the account of whoever follows a later sign-up's link. (A database older than email_links gets the table,
-- with the column, from schema.sql.)
ALTER TABLE IF EXISTS email_links ADD COLUMN IF NOT EXISTS sign_up jsonb;
ALTER TABLE IF EXISTS email_links DROP CONSTRAINT IF EXISTS email_links_sign_up_check;
ALTER TABLE IF EXISTS email_links ADD CONSTRAINT email_links_sign_up_check CHECK (sign_up IS NULL OR purpose = 'verify');
