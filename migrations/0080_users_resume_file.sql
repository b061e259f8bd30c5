-- A person's profile names a résumé among their files (the `files` table and the column's foreign key arrive
-- with schema.sql, applied after the migrations).
ALTER TABLE IF EXISTS users ADD COLUMN IF NOT EXISTS resume_file_id uuid;
