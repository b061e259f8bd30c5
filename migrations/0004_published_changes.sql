-- The edit trigger now runs jobs_count_published(), which also logs the change (schema.sql recreates the
-- trigger on it); its former function goes, with the trigger that used it.
DROP FUNCTION IF EXISTS jobs_published_edited() CASCADE;
