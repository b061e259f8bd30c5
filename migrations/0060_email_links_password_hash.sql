-- A verification link keeps the password hash of the sign-up it was sent for (docs/security.md): a second
-- sign-up with the same unverified address no longer replaces the first one's password.
ALTER TABLE email_links ADD COLUMN IF NOT EXISTS password_hash text;
DO $$
BEGIN
    ALTER TABLE email_links ADD CONSTRAINT email_links_password_check
        CHECK (password_hash IS NULL OR purpose = 'verify');
EXCEPTION WHEN duplicate_object THEN NULL;
END $$;
