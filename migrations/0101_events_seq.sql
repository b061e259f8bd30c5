-- events.list lists an account's events newest first; `created_at` holds whole seconds (the envelope's
-- timestamp), and a random id ordered the events of one second at random. `seq` numbers them as emitted.
ALTER TABLE events ADD COLUMN IF NOT EXISTS seq bigint GENERATED ALWAYS AS IDENTITY;
