-- profile.delete erases a person but keeps their row, empty, as the opaque id their applications keep;
-- `deleted_at` marks it so that no credential resolves to it any more (docs/privacy.md).
ALTER TABLE users ADD COLUMN IF NOT EXISTS deleted_at timestamptz(0);
