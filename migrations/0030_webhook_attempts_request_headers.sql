-- The panel's delivery detail shows the headers each attempt sent (the signatures among them).
ALTER TABLE webhook_attempts ADD COLUMN IF NOT EXISTS request_headers jsonb;
