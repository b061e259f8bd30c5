-- jobs.search matches a stored tsvector (docs/search.md); schema.sql's trigger keeps it and fills it for the
-- jobs written before it.
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS search_doc tsvector;
