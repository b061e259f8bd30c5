-- People (docs/people.md): e-mail verification, the session epoch that ends every session token at once
-- (password reset or change, removal from a team, "sign out everywhere"), and the last sign-in for Settings > Team.
ALTER TABLE users ADD COLUMN IF NOT EXISTS email_verified_at timestamptz(0);
ALTER TABLE users ADD COLUMN IF NOT EXISTS session_epoch integer NOT NULL DEFAULT 0;
ALTER TABLE users ADD COLUMN IF NOT EXISTS last_signin_at timestamptz(0);
-- Everyone who could sign in before sign-up existed was made by an operator: verified.
UPDATE users SET email_verified_at = created_at WHERE email_verified_at IS NULL AND issuer IS NULL;
