-- The Hire API's whole current schema. Idempotent: `bin/migrate` applies it to an empty database and
-- re-applies it after the pending migrations/ of an existing one (new tables and indexes arrive that way;
-- changes to existing tables arrive as numbered migrations). Every constraint is named: the API maps
-- unique violations to `409 conflict` by constraint name.

CREATE EXTENSION IF NOT EXISTS pg_trgm;

-- ---------------------------------------------------------------------------------------------------
-- Accounts and people
-- ---------------------------------------------------------------------------------------------------

CREATE TABLE IF NOT EXISTS accounts (
    id          uuid           NOT NULL DEFAULT gen_random_uuid(),
    name        text           NOT NULL,
    plan        text           NOT NULL DEFAULT 'free',
    created_at  timestamptz(0) NOT NULL DEFAULT now(),
    CONSTRAINT accounts_pkey PRIMARY KEY (id),
    CONSTRAINT accounts_name_check CHECK (length(name) BETWEEN 1 AND 200)
);

CREATE TABLE IF NOT EXISTS users (
    id             uuid           NOT NULL DEFAULT gen_random_uuid(),
    account_id     uuid           NOT NULL,
    role           text           NOT NULL,
    email          text,
    password_hash  text,
    -- An external identity provider's (iss, sub); NULL for users of the built-in provider.
    issuer         text,
    subject        text,
    display_name   text,
    headline       text,
    location       text,
    bio            text,
    created_at     timestamptz(0) NOT NULL DEFAULT now(),
    updated_at     timestamptz(0) NOT NULL DEFAULT now(),
    -- Built-in provider: NULL until the person follows the link of the sign-up mail (docs/people.md).
    email_verified_at  timestamptz(0),
    -- Carried by every session token; raised by a password reset or change, a removal from the team or
    -- "sign out everywhere", which ends every session token issued before at its next use.
    session_epoch      integer        NOT NULL DEFAULT 0,
    last_signin_at     timestamptz(0),
    -- Set when the person was erased (docs/privacy.md): the row stays, empty, as the opaque id their
    -- applications keep, and no credential resolves to it any more.
    deleted_at     timestamptz(0),
    -- The résumé on the person's profile (a File of their own; the foreign key is added with `files`).
    resume_file_id uuid,
    -- A member of a hiring account is mailed each new application to its jobs unless they turn it off.
    notify_new_applications  boolean  NOT NULL DEFAULT true,
    -- The private calendar feed's address is derived from this: rotating it raises the number, and the old
    -- address answers 404 at once (docs/interviews.md).
    calendar_epoch  integer        NOT NULL DEFAULT 0,
    CONSTRAINT users_pkey PRIMARY KEY (id),
    CONSTRAINT users_account_fkey FOREIGN KEY (account_id) REFERENCES accounts (id) ON DELETE CASCADE,
    CONSTRAINT users_role_check CHECK (role IN ('candidate', 'employer', 'admin')),
    CONSTRAINT users_email_check CHECK (email = lower(email)),
    CONSTRAINT users_identity_check CHECK ((issuer IS NULL) = (subject IS NULL)),
    CONSTRAINT users_identity_key UNIQUE (issuer, subject)
);
-- E-mail is the sign-in name of the built-in provider, so unique there; external identities are keyed
-- by (issuer, subject) and may repeat an address.
CREATE UNIQUE INDEX IF NOT EXISTS users_email_key ON users (email) WHERE issuer IS NULL;
CREATE INDEX IF NOT EXISTS users_account_idx ON users (account_id);

-- ---------------------------------------------------------------------------------------------------
-- Credentials
-- ---------------------------------------------------------------------------------------------------

CREATE TABLE IF NOT EXISTS api_keys (
    id            uuid           NOT NULL DEFAULT gen_random_uuid(),
    user_id       uuid           NOT NULL,
    name          text           NOT NULL,
    mode          text           NOT NULL,
    -- The first characters of the key, enough to recognise it in a list; never enough to use it.
    prefix        text           NOT NULL,
    key_hash      bytea          NOT NULL,
    scopes        text[]         NOT NULL,
    created_at    timestamptz(0) NOT NULL DEFAULT now(),
    last_used_at  timestamptz(0),
    revoked_at    timestamptz(0),
    CONSTRAINT api_keys_pkey PRIMARY KEY (id),
    CONSTRAINT api_keys_user_fkey FOREIGN KEY (user_id) REFERENCES users (id) ON DELETE CASCADE,
    CONSTRAINT api_keys_mode_check CHECK (mode IN ('live', 'test')),
    CONSTRAINT api_keys_name_check CHECK (length(name) BETWEEN 1 AND 100),
    CONSTRAINT api_keys_key_hash_key UNIQUE (key_hash)
);
CREATE INDEX IF NOT EXISTS api_keys_user_idx ON api_keys (user_id);

-- Refresh tokens of the built-in identity provider. One family per sign-in: every rotation adds a row
-- to it, and presenting a rotated (used) token again revokes the whole family.
CREATE TABLE IF NOT EXISTS refresh_tokens (
    id          uuid           NOT NULL DEFAULT gen_random_uuid(),
    family_id   uuid           NOT NULL,
    user_id     uuid           NOT NULL,
    token_hash  bytea          NOT NULL,
    created_at  timestamptz(0) NOT NULL DEFAULT now(),
    expires_at  timestamptz(0) NOT NULL,
    used_at     timestamptz(0),
    revoked_at  timestamptz(0),
    CONSTRAINT refresh_tokens_pkey PRIMARY KEY (id),
    CONSTRAINT refresh_tokens_user_fkey FOREIGN KEY (user_id) REFERENCES users (id) ON DELETE CASCADE,
    CONSTRAINT refresh_tokens_token_hash_key UNIQUE (token_hash)
);
CREATE INDEX IF NOT EXISTS refresh_tokens_family_idx ON refresh_tokens (family_id);
CREATE INDEX IF NOT EXISTS refresh_tokens_user_idx ON refresh_tokens (user_id);
CREATE INDEX IF NOT EXISTS refresh_tokens_expires_idx ON refresh_tokens (expires_at);  -- rpc/housekeeping.py

-- Token-signing keys of the built-in identity provider; the private key is sealed with SERVICE_SECRET_KEY.
CREATE TABLE IF NOT EXISTS signing_keys (
    kid                 text           NOT NULL,
    algorithm           text           NOT NULL,
    private_key_sealed  bytea          NOT NULL,
    public_jwk          jsonb          NOT NULL,
    created_at          timestamptz(0) NOT NULL DEFAULT now(),
    retired_at          timestamptz(0),
    CONSTRAINT signing_keys_pkey PRIMARY KEY (kid),
    CONSTRAINT signing_keys_algorithm_check CHECK (algorithm = 'ES256')
);

-- Single-use links mailed to a person of the built-in provider: e-mail verification (24 hours) and password
-- reset (1 hour). Only the token's SHA-256 is kept; `email` is the address it was sent to, so a link for an
-- address the person no longer has does nothing. A verification link keeps the password hash of the sign-up it
-- was sent for: following it sets that password, so signing up again never changes who can sign in.
CREATE TABLE IF NOT EXISTS email_links (
    id             uuid           NOT NULL DEFAULT gen_random_uuid(),
    purpose        text           NOT NULL,
    user_id        uuid           NOT NULL,
    email          text           NOT NULL,
    token_hash     bytea          NOT NULL,
    created_at     timestamptz(0) NOT NULL DEFAULT now(),
    expires_at     timestamptz    NOT NULL,
    used_at        timestamptz(0),
    password_hash  text,
    -- A sign-up's link: what that sign-up asked to be ({role, display_name, account_name}), set when it is followed.
    sign_up        jsonb,
    -- The page of this site the person was on when the link was asked for (the job they were applying to):
    -- where signing in goes on to once it is followed.
    next_path      text,
    CONSTRAINT email_links_pkey PRIMARY KEY (id),
    CONSTRAINT email_links_user_fkey FOREIGN KEY (user_id) REFERENCES users (id) ON DELETE CASCADE,
    CONSTRAINT email_links_purpose_check CHECK (purpose IN ('verify', 'reset')),
    CONSTRAINT email_links_token_hash_key UNIQUE (token_hash),
    CONSTRAINT email_links_password_check CHECK (password_hash IS NULL OR purpose = 'verify'),
    CONSTRAINT email_links_sign_up_check CHECK (sign_up IS NULL OR purpose = 'verify'),
    CONSTRAINT email_links_next_path_check CHECK (next_path IS NULL OR (next_path LIKE '/%' AND length(next_path) <= 2000))
);
-- A new link, a reset or a verification voids the person's other open links of that purpose.
CREATE INDEX IF NOT EXISTS email_links_user_idx ON email_links (user_id, purpose) WHERE used_at IS NULL;
CREATE INDEX IF NOT EXISTS email_links_expires_idx ON email_links (expires_at);  -- rpc/auth/housekeeping.py

-- Invitations into a hiring account (Settings > Team, `bin/admin invite`): a single-use link valid 7 days.
-- Resending replaces the token (the old link dies); accepting makes a verified employer of the account.
CREATE TABLE IF NOT EXISTS invitations (
    id           uuid           NOT NULL DEFAULT gen_random_uuid(),
    account_id   uuid           NOT NULL,
    email        text           NOT NULL,
    invited_by   uuid,
    token_hash   bytea          NOT NULL,
    created_at   timestamptz(0) NOT NULL DEFAULT now(),
    expires_at   timestamptz    NOT NULL,
    accepted_at  timestamptz(0),
    revoked_at   timestamptz(0),
    CONSTRAINT invitations_pkey PRIMARY KEY (id),
    CONSTRAINT invitations_account_fkey FOREIGN KEY (account_id) REFERENCES accounts (id) ON DELETE CASCADE,
    CONSTRAINT invitations_invited_by_fkey FOREIGN KEY (invited_by) REFERENCES users (id) ON DELETE SET NULL,
    CONSTRAINT invitations_email_check CHECK (email = lower(email) AND length(email) BETWEEN 3 AND 254),
    CONSTRAINT invitations_token_hash_key UNIQUE (token_hash)
);
CREATE INDEX IF NOT EXISTS invitations_email_idx ON invitations (email);  -- erasure
-- One open invitation per account and address: inviting again resends it.
CREATE UNIQUE INDEX IF NOT EXISTS invitations_open_key ON invitations (account_id, email)
    WHERE accepted_at IS NULL AND revoked_at IS NULL;

-- Outgoing e-mail, written in the transaction of the change it announces and sent by the queue's workers
-- (job `hire.send_mail`). The message is sealed with SERVICE_SECRET_KEY (it carries a live link) and
-- dropped once sent; the row stays as the record.
CREATE TABLE IF NOT EXISTS mail_messages (
    id              uuid           NOT NULL DEFAULT gen_random_uuid(),
    kind            text           NOT NULL,
    recipient       text           NOT NULL,
    message_sealed  bytea,
    status          text           NOT NULL DEFAULT 'pending',
    attempts        integer        NOT NULL DEFAULT 0,
    last_error      text,
    created_at      timestamptz(0) NOT NULL DEFAULT now(),
    sent_at         timestamptz(0),
    CONSTRAINT mail_messages_pkey PRIMARY KEY (id),
    CONSTRAINT mail_messages_status_check CHECK (status IN ('pending', 'sent', 'failed')),
    CONSTRAINT mail_messages_sealed_check CHECK ((status = 'pending') = (message_sealed IS NOT NULL))
);
CREATE INDEX IF NOT EXISTS mail_messages_created_idx ON mail_messages (created_at DESC);
CREATE INDEX IF NOT EXISTS mail_messages_recipient_idx ON mail_messages (recipient);  -- erasure

-- ---------------------------------------------------------------------------------------------------
-- Jobs
-- ---------------------------------------------------------------------------------------------------

CREATE TABLE IF NOT EXISTS jobs (
    id               uuid           NOT NULL DEFAULT gen_random_uuid(),
    account_id       uuid           NOT NULL,
    created_by       uuid,
    title            text           NOT NULL,
    company          text           NOT NULL,
    location         text           NOT NULL,
    description      text,
    employment_type  text,
    status           text           NOT NULL DEFAULT 'draft',
    created_at       timestamptz(0) NOT NULL DEFAULT now(),
    updated_at       timestamptz(0) NOT NULL DEFAULT now(),
    published_at     timestamptz(0),
    closed_at        timestamptz(0),
    -- What jobs.search matches: kept by the jobs_search_document trigger (docs/search.md).
    search_doc       tsvector,
    -- The writing transaction's id, stamped on every insert and update: the position in `jobs.changes`.
    change_xid       xid8           NOT NULL DEFAULT pg_current_xact_id(),
    -- What interviewers rate on a scorecard: at most 20 distinct names (docs/interviews.md).
    scorecard_attributes  text[]   NOT NULL DEFAULT '{}',
    CONSTRAINT jobs_pkey PRIMARY KEY (id),
    CONSTRAINT jobs_account_fkey FOREIGN KEY (account_id) REFERENCES accounts (id) ON DELETE CASCADE,
    CONSTRAINT jobs_created_by_fkey FOREIGN KEY (created_by) REFERENCES users (id) ON DELETE SET NULL,
    CONSTRAINT jobs_status_check CHECK (status IN ('draft', 'published', 'closed')),
    CONSTRAINT jobs_employment_type_check
        CHECK (employment_type IN ('full_time', 'part_time', 'contract', 'internship', 'temporary')),
    CONSTRAINT jobs_scorecard_attributes_check CHECK (cardinality(scorecard_attributes) <= 20)
);
-- The public list: published jobs, newest first.
CREATE INDEX IF NOT EXISTS jobs_published_idx ON jobs (created_at DESC, id DESC) WHERE status = 'published';
-- `mine=true`: one account's jobs in every status, newest first.
CREATE INDEX IF NOT EXISTS jobs_account_idx ON jobs (account_id, created_at DESC, id DESC);
-- `jobs.changes`: the feed in (change_xid, id) order.
CREATE INDEX IF NOT EXISTS jobs_change_idx ON jobs (change_xid, id);
-- Case-insensitive substring filters (`q` on title or company, `location`, `company`).
CREATE INDEX IF NOT EXISTS jobs_title_trgm_idx ON jobs USING gin (title gin_trgm_ops);
CREATE INDEX IF NOT EXISTS jobs_company_trgm_idx ON jobs USING gin (company gin_trgm_ops);
CREATE INDEX IF NOT EXISTS jobs_location_trgm_idx ON jobs USING gin (location gin_trgm_ops);

-- Every write to a job or an application stamps the row with its transaction's id, whichever path wrote it
-- (procedures, panel, admin commands, periodic jobs, a hand-written UPDATE): the incremental sync feeds
-- read rows below the oldest transaction still running, so a change is never skipped (docs/sync.md).
CREATE OR REPLACE FUNCTION stamp_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.change_xid := pg_current_xact_id();
    RETURN NEW;
END
$$;
CREATE OR REPLACE TRIGGER jobs_stamp_change BEFORE INSERT OR UPDATE ON jobs
    FOR EACH ROW EXECUTE FUNCTION stamp_change();

-- Job search (docs/search.md). `unaccent` is not in every PostgreSQL (the embedded one lacks
-- it), so accents are folded here, by one function used where the search text is made and where it is asked:
-- lower case, Latin letters without their marks, Turkish ı and İ as i. IMMUTABLE, so indexes may use it.
CREATE OR REPLACE FUNCTION job_fold(value text) RETURNS text LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT replace(replace(replace(lower(translate(value,
        'ÀÁÂÃÄÅÇÈÉÊËÌÍÎÏÑÒÓÔÕÖØÙÚÛÜÝàáâãäåçèéêëìíîïñòóôõöøùúûüýÿĀāĂăĄąĆćĈĉĊċČčĎďĐđĒēĔĕĖėĘęĚěĜĝĞğĠġĢģĤĥĦħĨĩĪīĬĭĮįİıĴĵĶķĹĺĻļĽľŁłŃńŅņŇňŌōŎŏŐőŔŕŖŗŘřŚśŜŝŞşŠšŢţŤťŦŧŨũŪūŬŭŮůŰűŲųŴŵŶŷŸŹźŻżŽžƀƠơƯưǍǎǏǐǑǒǓǔǕǖǗǘǙǚǛǜǞǟǠǡǦǧǨǩǪǫǬǭǰǴǵǸǹǺǻȀȁȂȃȄȅȆȇȈȉȊȋȌȍȎȏȐȑȒȓȔȕȖȗȘșȚțȞȟȦȧȨȩȪȫȬȭȮȯȰȱȲȳ',
        'aaaaaaceeeeiiiinoooooouuuuyaaaaaaceeeeiiiinoooooouuuuyyaaaaaaccccccccddddeeeeeeeeeegggggggghhhhiiiiiiiiiijjkkllllllllnnnnnnoooooorrrrrrssssssssttttttuuuuuuuuuuuuwwyyyzzzzzzboouuaaiioouuuuuuuuuuaaaaggkkoooojggnnaaaaaaeeeeiiiioooorrrruuuusstthhaaeeooooooooyy')),
        'ß', 'ss'), 'æ', 'ae'), 'œ', 'oe')
$$;

-- The searchable text of a job: English stems (plural and singular meet), weighted so that relevance can tell
-- a title match (A) from company (B), location (C) and description (D).
CREATE OR REPLACE FUNCTION job_document(title text, company text, location text, description text)
RETURNS tsvector LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT setweight(to_tsvector('english', job_fold(title)), 'A')
        || setweight(to_tsvector('english', job_fold(company)), 'B')
        || setweight(to_tsvector('english', job_fold(location)), 'C')
        || setweight(to_tsvector('english', coalesce(job_fold(description), '')), 'D')
$$;

CREATE OR REPLACE FUNCTION jobs_search_document() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.search_doc := job_document(NEW.title, NEW.company, NEW.location, NEW.description);
    RETURN NEW;
END
$$;
CREATE OR REPLACE TRIGGER jobs_search_document BEFORE INSERT OR UPDATE OF title, company, location, description
    ON jobs FOR EACH ROW EXECUTE FUNCTION jobs_search_document();
-- Jobs written before the column existed (a no-op afterwards).
UPDATE jobs SET search_doc = job_document(title, company, location, description) WHERE search_doc IS NULL;

-- What a search box's text asks: web-search syntax (words, "phrases", -exclusions, or) over the folded text,
-- with the last word also a prefix (`pyth` finds python) unless it is excluded, closes a phrase, or is `or`.
-- websearch_to_tsquery writes its operands in the order typed, so that word's lexeme is the query's last.
CREATE OR REPLACE FUNCTION job_search_query(typed text) RETURNS tsquery
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
    folded   text := job_fold(typed);
    asked    tsquery := websearch_to_tsquery('english', folded);
    last     text := substring(folded FROM '(\S+)\s*$');
    lexeme   text;
    shown    text := asked::text;
    trimmed  text := rtrim(shown, ' )');
BEGIN
    IF last IS NULL OR last LIKE '-%' OR last LIKE '%"' OR last = 'or' THEN
        RETURN asked;
    END IF;
    lexeme := websearch_to_tsquery('english', ltrim(last, '"'))::text;
    IF lexeme !~ '^''[^'']*''$' OR right(trimmed, length(lexeme)) <> lexeme THEN
        RETURN asked;
    END IF;
    RETURN (trimmed || ':*' || substr(shown, length(trimmed) + 1))::tsquery;
END
$$;

-- Only published jobs are searched: the text index, and the folded substring filters of jobs.search.
CREATE INDEX IF NOT EXISTS jobs_search_idx ON jobs USING gin (search_doc) WHERE status = 'published';
CREATE INDEX IF NOT EXISTS jobs_search_location_idx ON jobs USING gin (job_fold(location) gin_trgm_ops)
    WHERE status = 'published';
CREATE INDEX IF NOT EXISTS jobs_search_company_idx ON jobs USING gin (job_fold(company) gin_trgm_ops)
    WHERE status = 'published';
-- sort=newest and the tie-break of relevance: latest publication first.
CREATE INDEX IF NOT EXISTS jobs_search_newest_idx ON jobs (published_at DESC, id DESC) WHERE status = 'published';

-- The number of published jobs, kept in the transactions that publish and close jobs, so that the public
-- list never counts a million rows. Drafts do not touch it: creating jobs never contends on this row.
CREATE TABLE IF NOT EXISTS job_totals (
    status  text   NOT NULL,
    total   bigint NOT NULL DEFAULT 0,
    -- Bumped by every change to the published set (a job published or closed, a published job edited), in the
    -- change's transaction: caches of published jobs are exact while it stands still (docs/search.md).
    version bigint NOT NULL DEFAULT 0,
    -- When the version last moved, to the second: the Last-Modified of the public feed and sitemap.
    changed_at timestamptz(0) NOT NULL DEFAULT now(),
    CONSTRAINT job_totals_pkey PRIMARY KEY (status),
    CONSTRAINT job_totals_status_check CHECK (status = 'published'),
    CONSTRAINT job_totals_total_check CHECK (total >= 0)
);
-- Every change to the published set, under the version it made: each job's state as it entered or left the
-- set. A remembered answer about published jobs follows the changes made since it was computed instead of
-- being computed again (procedures/published_cache.py, docs/search.md). The last LOG_KEPT versions are kept.
CREATE TABLE IF NOT EXISTS published_changes (
    version         bigint      NOT NULL,
    id              uuid        NOT NULL,  -- the job's
    entered         boolean     NOT NULL,  -- true: this state joined the published set; false: it left it
    title           text        NOT NULL,
    company         text        NOT NULL,
    location        text        NOT NULL,
    employment_type text,
    search_doc      tsvector,
    created_at      timestamptz NOT NULL,
    published_at    timestamptz,
    CONSTRAINT published_changes_pkey PRIMARY KEY (version, id, entered)
);

-- One function for the three triggers below: a job published or closed (or a published one inserted or
-- deleted) moves the total; that, or an edit of a published job, bumps the version and logs the change.
CREATE OR REPLACE FUNCTION jobs_count_published() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    was_published boolean := TG_OP IN ('UPDATE', 'DELETE') AND OLD.status = 'published';
    is_published  boolean := TG_OP IN ('INSERT', 'UPDATE') AND NEW.status = 'published';
    changed       bigint;
    log_kept      CONSTANT bigint := 10000;
BEGIN
    IF NOT (was_published OR is_published) THEN
        RETURN NULL;
    END IF;
    UPDATE job_totals SET total = total + is_published::int - was_published::int, version = version + 1,
        changed_at = greatest(changed_at, clock_timestamp())
    WHERE status = 'published' RETURNING version INTO changed;
    IF was_published THEN
        INSERT INTO published_changes VALUES (changed, OLD.id, false, OLD.title, OLD.company, OLD.location,
            OLD.employment_type, OLD.search_doc, OLD.created_at, OLD.published_at);
    END IF;
    IF is_published THEN
        INSERT INTO published_changes VALUES (changed, NEW.id, true, NEW.title, NEW.company, NEW.location,
            NEW.employment_type, NEW.search_doc, NEW.created_at, NEW.published_at);
    END IF;
    IF changed % 1000 = 0 THEN
        DELETE FROM published_changes WHERE version <= changed - log_kept;
    END IF;
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER jobs_count_insert_delete AFTER INSERT OR DELETE ON jobs
    FOR EACH ROW EXECUTE FUNCTION jobs_count_published();
CREATE OR REPLACE TRIGGER jobs_count_status_change AFTER UPDATE OF status ON jobs
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status) EXECUTE FUNCTION jobs_count_published();
CREATE OR REPLACE TRIGGER jobs_published_edit AFTER UPDATE OF title, company, location, description, employment_type
    ON jobs FOR EACH ROW WHEN (OLD.status = 'published' AND NEW.status = 'published'
        AND (OLD.title, OLD.company, OLD.location, OLD.description, OLD.employment_type)
            IS DISTINCT FROM (NEW.title, NEW.company, NEW.location, NEW.description, NEW.employment_type))
    EXECUTE FUNCTION jobs_count_published();

-- Seeded from the jobs themselves, so that a database older than the counter starts exact. After the
-- triggers: creating them locks out writers to `jobs` until this transaction commits, so none is missed.
-- The version continues after the last one logged: versions never go back, so no remembered answer can pass
-- for a later one, and the log's versions stay unique.
INSERT INTO job_totals (status, total, version)
SELECT 'published', count(*), (SELECT coalesce(max(version), 0) + 1 FROM published_changes)
FROM jobs WHERE status = 'published'
ON CONFLICT DO NOTHING;

-- ---------------------------------------------------------------------------------------------------
-- Applications and the hiring pipeline
-- ---------------------------------------------------------------------------------------------------

CREATE TABLE IF NOT EXISTS applications (
    id                    uuid           NOT NULL DEFAULT gen_random_uuid(),
    job_id                uuid           NOT NULL,
    candidate_id          uuid           NOT NULL,
    -- The candidate's account at the time of applying: events about the application go to it.
    candidate_account_id  uuid           NOT NULL,
    status                text           NOT NULL DEFAULT 'pending',
    cover_letter          text,
    resume_url            text,
    rating                smallint,
    notes                 text,
    created_at            timestamptz(0) NOT NULL DEFAULT now(),
    updated_at            timestamptz(0) NOT NULL DEFAULT now(),
    -- The writing transaction's id, stamped on every insert and update: the position in `applications.changes`.
    change_xid            xid8           NOT NULL DEFAULT pg_current_xact_id(),
    CONSTRAINT applications_pkey PRIMARY KEY (id),
    CONSTRAINT applications_job_fkey FOREIGN KEY (job_id) REFERENCES jobs (id) ON DELETE CASCADE,
    CONSTRAINT applications_candidate_fkey FOREIGN KEY (candidate_id) REFERENCES users (id) ON DELETE CASCADE,
    CONSTRAINT applications_candidate_account_fkey
        FOREIGN KEY (candidate_account_id) REFERENCES accounts (id) ON DELETE CASCADE,
    CONSTRAINT applications_status_check CHECK (status IN (
        'pending', 'reviewed', 'interview_scheduled', 'offered', 'hired', 'rejected', 'withdrawn')),
    CONSTRAINT applications_rating_check CHECK (rating BETWEEN 1 AND 5),
    -- One application per candidate and job: a second one is `409 conflict`.
    CONSTRAINT applications_job_candidate_key UNIQUE (job_id, candidate_id)
);
-- A candidate's applications, newest first.
CREATE INDEX IF NOT EXISTS applications_candidate_idx ON applications (candidate_id, created_at DESC, id DESC);
-- An employer's view goes through the job: applications of one job, newest first.
CREATE INDEX IF NOT EXISTS applications_job_idx ON applications (job_id, created_at DESC, id DESC);
-- The hiring desk: a job's applicants of one status, newest first, and how many stand in each status.
CREATE INDEX IF NOT EXISTS applications_job_status_idx ON applications (job_id, status, created_at DESC, id DESC);
-- `applications.changes` in (change_xid, id) order: everyone's (an admin), a candidate's, one job's (an
-- employer's, job by job of the account).
CREATE INDEX IF NOT EXISTS applications_change_idx ON applications (change_xid, id);
CREATE INDEX IF NOT EXISTS applications_candidate_change_idx ON applications (candidate_id, change_xid, id);
CREATE INDEX IF NOT EXISTS applications_job_change_idx ON applications (job_id, change_xid, id);
CREATE OR REPLACE TRIGGER applications_stamp_change BEFORE INSERT OR UPDATE ON applications
    FOR EACH ROW EXECUTE FUNCTION stamp_change();
-- Retention: applications in a final state that still hold what the candidate wrote.
CREATE INDEX IF NOT EXISTS applications_retention_idx ON applications (updated_at)
    WHERE status IN ('hired', 'rejected', 'withdrawn')
      AND (cover_letter IS NOT NULL OR resume_url IS NOT NULL OR notes IS NOT NULL);

-- One row per status change: who moved the application, when, from what to what.
CREATE TABLE IF NOT EXISTS application_status_history (
    id              bigint         GENERATED ALWAYS AS IDENTITY,
    application_id  uuid           NOT NULL,
    from_status     text,
    to_status       text           NOT NULL,
    changed_by      uuid,
    changed_at      timestamptz(0) NOT NULL DEFAULT now(),
    CONSTRAINT application_status_history_pkey PRIMARY KEY (id),
    CONSTRAINT application_status_history_application_fkey
        FOREIGN KEY (application_id) REFERENCES applications (id) ON DELETE CASCADE,
    CONSTRAINT application_status_history_changed_by_fkey
        FOREIGN KEY (changed_by) REFERENCES users (id) ON DELETE SET NULL
);
CREATE INDEX IF NOT EXISTS application_status_history_application_idx
    ON application_status_history (application_id, id);

-- ---------------------------------------------------------------------------------------------------
-- Files: résumés and attachments (docs/files.md). The bytes live in the file store (DATA_DIR/files/ or an
-- S3-compatible bucket) under the file's id, written before its row commits; a deleted row queues its bytes
-- for deletion, so no path that deletes a File leaves its bytes behind.
-- ---------------------------------------------------------------------------------------------------

CREATE TABLE IF NOT EXISTS files (
    id            uuid           NOT NULL,
    owner_id      uuid           NOT NULL,
    filename      text           NOT NULL,
    content_type  text           NOT NULL,
    size          bigint         NOT NULL,
    sha256        text           NOT NULL,
    created_at    timestamptz(0) NOT NULL DEFAULT now(),
    CONSTRAINT files_pkey PRIMARY KEY (id),
    CONSTRAINT files_owner_fkey FOREIGN KEY (owner_id) REFERENCES users (id) ON DELETE CASCADE,
    CONSTRAINT files_filename_check CHECK (length(filename) BETWEEN 1 AND 255),
    CONSTRAINT files_content_type_check CHECK (content_type IN (
        'application/pdf',
        'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
        'application/vnd.oasis.opendocument.text',
        'text/plain; charset=utf-8')),
    CONSTRAINT files_size_check CHECK (size >= 0),
    CONSTRAINT files_sha256_check CHECK (sha256 ~ '^[0-9a-f]{64}$')
);
-- A person's files (export, erasure); files by age (the sweep of unreferenced ones).
CREATE INDEX IF NOT EXISTS files_owner_idx ON files (owner_id, created_at DESC);
CREATE INDEX IF NOT EXISTS files_created_idx ON files (created_at);

-- The files an application was made with: its résumé (at most one) and up to five attachments, in order. A
-- File still held here (or on a profile) cannot be deleted: its deletion fails instead of losing the link.
CREATE TABLE IF NOT EXISTS application_files (
    application_id  uuid      NOT NULL,
    file_id         uuid      NOT NULL,
    kind            text      NOT NULL,
    position        smallint  NOT NULL,
    CONSTRAINT application_files_pkey PRIMARY KEY (application_id, file_id),
    CONSTRAINT application_files_application_fkey
        FOREIGN KEY (application_id) REFERENCES applications (id) ON DELETE CASCADE,
    CONSTRAINT application_files_file_fkey FOREIGN KEY (file_id) REFERENCES files (id) ON DELETE RESTRICT,
    CONSTRAINT application_files_kind_check CHECK (kind IN ('resume', 'attachment')),
    CONSTRAINT application_files_position_check CHECK (position BETWEEN 0 AND 5),
    CONSTRAINT application_files_position_key UNIQUE (application_id, kind, position)
);
-- Who may read a file: the applications holding it.
CREATE INDEX IF NOT EXISTS application_files_file_idx ON application_files (file_id);
CREATE INDEX IF NOT EXISTS users_resume_file_idx ON users (resume_file_id) WHERE resume_file_id IS NOT NULL;
DO $$
BEGIN
    ALTER TABLE users ADD CONSTRAINT users_resume_file_fkey
        FOREIGN KEY (resume_file_id) REFERENCES files (id) ON DELETE RESTRICT;
EXCEPTION WHEN duplicate_object THEN NULL;
END $$;

-- Bytes whose File is gone, to be deleted from the store by the files sweep (rpc/files/sweep.py).
CREATE TABLE IF NOT EXISTS file_deletions (
    file_id     uuid           NOT NULL,
    deleted_at  timestamptz(0) NOT NULL DEFAULT now(),
    CONSTRAINT file_deletions_pkey PRIMARY KEY (file_id)
);
CREATE OR REPLACE FUNCTION queue_file_bytes_deletion() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO file_deletions (file_id) VALUES (OLD.id) ON CONFLICT ON CONSTRAINT file_deletions_pkey DO NOTHING;
    RETURN OLD;
END $$;
CREATE OR REPLACE TRIGGER files_queue_bytes_deletion AFTER DELETE ON files
    FOR EACH ROW EXECUTE FUNCTION queue_file_bytes_deletion();

-- ---------------------------------------------------------------------------------------------------
-- The recruiting loop (docs/interviews.md): interviews with their interviewers, scorecards, offers and
-- their approvals. Every row belongs to one application and goes with it.
-- ---------------------------------------------------------------------------------------------------

-- Overlapping times are refused by exclusion constraints over time ranges, which need equality on uuids in
-- a GiST index.
CREATE EXTENSION IF NOT EXISTS btree_gist;

-- An interview: a time, in a time zone, for one application. `sequence` grows with every change that alters
-- what its invitations say (RFC 5545's SEQUENCE); `cancelled_at` ends it, and a cancelled interview keeps its
-- scorecards. The status a reader sees (scheduled, awaiting feedback, completed) follows from the time and the
-- scorecards when read.
CREATE TABLE IF NOT EXISTS interviews (
    id              uuid           NOT NULL DEFAULT gen_random_uuid(),
    application_id  uuid           NOT NULL,
    job_id          uuid           NOT NULL,
    -- The job's account, whose members interview and whose events these are.
    account_id      uuid           NOT NULL,
    candidate_id    uuid           NOT NULL,
    title           text           NOT NULL,
    starts_at       timestamptz(0) NOT NULL,
    ends_at         timestamptz(0) NOT NULL,
    time_zone       text           NOT NULL,
    location        text,
    video_url       text,
    sequence        integer        NOT NULL DEFAULT 0,
    cancelled_at    timestamptz(0),
    cancel_reason   text,
    created_by      uuid,
    created_at      timestamptz(0) NOT NULL DEFAULT now(),
    updated_at      timestamptz(0) NOT NULL DEFAULT now(),
    CONSTRAINT interviews_pkey PRIMARY KEY (id),
    CONSTRAINT interviews_application_fkey FOREIGN KEY (application_id) REFERENCES applications (id) ON DELETE CASCADE,
    CONSTRAINT interviews_job_fkey FOREIGN KEY (job_id) REFERENCES jobs (id) ON DELETE CASCADE,
    CONSTRAINT interviews_account_fkey FOREIGN KEY (account_id) REFERENCES accounts (id) ON DELETE CASCADE,
    CONSTRAINT interviews_candidate_fkey FOREIGN KEY (candidate_id) REFERENCES users (id) ON DELETE CASCADE,
    CONSTRAINT interviews_created_by_fkey FOREIGN KEY (created_by) REFERENCES users (id) ON DELETE SET NULL,
    CONSTRAINT interviews_times_check CHECK (starts_at < ends_at AND ends_at <= starts_at + interval '8 hours'),
    CONSTRAINT interviews_sequence_check CHECK (sequence >= 0),
    -- A candidate is in one interview at a time: back to back is fine (half-open ranges).
    CONSTRAINT interviews_candidate_overlap
        EXCLUDE USING gist (candidate_id WITH =, tstzrange(starts_at, ends_at) WITH &&) WHERE (cancelled_at IS NULL)
);
CREATE INDEX IF NOT EXISTS interviews_application_idx ON interviews (application_id, starts_at, id);
CREATE INDEX IF NOT EXISTS interviews_job_idx ON interviews (job_id, starts_at, id);
CREATE INDEX IF NOT EXISTS interviews_account_idx ON interviews (account_id, starts_at, id);
CREATE INDEX IF NOT EXISTS interviews_candidate_idx ON interviews (candidate_id, starts_at, id);

-- Who interviews: a row per interviewer, in the order given, carrying a copy of its interview's time and
-- state (kept by the triggers below, whichever path writes) so that an interviewer's overlapping interviews
-- are refused by the database itself, also when two are booked at once. `next_reminder_at` is when the
-- interviewer is next reminded of a scorecard still owed (NULL: none owed, or the last reminder sent).
CREATE TABLE IF NOT EXISTS interview_interviewers (
    interview_id      uuid           NOT NULL,
    user_id           uuid           NOT NULL,
    position          smallint       NOT NULL,
    starts_at         timestamptz(0) NOT NULL,
    ends_at           timestamptz(0) NOT NULL,
    cancelled         boolean        NOT NULL DEFAULT false,
    next_reminder_at  timestamptz(0),
    reminders_sent    smallint       NOT NULL DEFAULT 0,
    CONSTRAINT interview_interviewers_pkey PRIMARY KEY (interview_id, user_id),
    CONSTRAINT interview_interviewers_interview_fkey
        FOREIGN KEY (interview_id) REFERENCES interviews (id) ON DELETE CASCADE,
    CONSTRAINT interview_interviewers_user_fkey FOREIGN KEY (user_id) REFERENCES users (id) ON DELETE CASCADE,
    CONSTRAINT interview_interviewers_position_check CHECK (position BETWEEN 0 AND 9),
    CONSTRAINT interview_interviewers_reminders_check CHECK (reminders_sent BETWEEN 0 AND 5),
    CONSTRAINT interview_interviewers_overlap
        EXCLUDE USING gist (user_id WITH =, tstzrange(starts_at, ends_at) WITH &&) WHERE (NOT cancelled)
);
-- An interviewer's week, in order (interviews.list with `interviewer_id`).
CREATE INDEX IF NOT EXISTS interview_interviewers_user_idx ON interview_interviewers (user_id, starts_at, interview_id);
-- The periodic reminders: the next ones due.
CREATE INDEX IF NOT EXISTS interview_interviewers_reminder_idx ON interview_interviewers (next_reminder_at)
    WHERE next_reminder_at IS NOT NULL;

CREATE OR REPLACE FUNCTION interviewer_takes_interview_time() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    SELECT i.starts_at, i.ends_at, i.cancelled_at IS NOT NULL INTO NEW.starts_at, NEW.ends_at, NEW.cancelled
    FROM interviews AS i WHERE i.id = NEW.interview_id;
    RETURN NEW;
END $$;
CREATE OR REPLACE TRIGGER interview_interviewers_take_time BEFORE INSERT ON interview_interviewers
    FOR EACH ROW EXECUTE FUNCTION interviewer_takes_interview_time();
CREATE OR REPLACE FUNCTION interview_moves_interviewers() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE interview_interviewers
    SET starts_at = NEW.starts_at, ends_at = NEW.ends_at, cancelled = NEW.cancelled_at IS NOT NULL
    WHERE interview_id = NEW.id;
    RETURN NULL;
END $$;
CREATE OR REPLACE TRIGGER interviews_move_interviewers AFTER UPDATE OF starts_at, ends_at, cancelled_at ON interviews
    FOR EACH ROW EXECUTE FUNCTION interview_moves_interviewers();

-- An interviewer's feedback on one interview, once: a recommendation, ratings of the job's scorecard
-- attributes (`[{"attribute", "rating", "note"}]`) and notes. Never deleted by a reschedule or a cancel.
CREATE TABLE IF NOT EXISTS scorecards (
    id              uuid           NOT NULL DEFAULT gen_random_uuid(),
    interview_id    uuid           NOT NULL,
    application_id  uuid           NOT NULL,
    interviewer_id  uuid           NOT NULL,
    recommendation  text           NOT NULL,
    ratings         jsonb          NOT NULL DEFAULT '[]',
    notes           text,
    submitted_at    timestamptz(0) NOT NULL DEFAULT now(),
    -- In the order submitted: scorecards of one second are listed in the order they came.
    seq             bigint         GENERATED ALWAYS AS IDENTITY,
    CONSTRAINT scorecards_pkey PRIMARY KEY (id),
    CONSTRAINT scorecards_interview_fkey FOREIGN KEY (interview_id) REFERENCES interviews (id) ON DELETE CASCADE,
    CONSTRAINT scorecards_application_fkey FOREIGN KEY (application_id) REFERENCES applications (id) ON DELETE CASCADE,
    CONSTRAINT scorecards_interviewer_fkey FOREIGN KEY (interviewer_id) REFERENCES users (id) ON DELETE CASCADE,
    CONSTRAINT scorecards_recommendation_check CHECK (recommendation IN ('strong_no', 'no', 'yes', 'strong_yes')),
    CONSTRAINT scorecards_ratings_check CHECK (jsonb_typeof(ratings) = 'array'),
    -- One scorecard per interviewer and interview: a second one is `409 conflict`.
    CONSTRAINT scorecards_interviewer_key UNIQUE (interview_id, interviewer_id)
);
CREATE INDEX IF NOT EXISTS scorecards_application_idx ON scorecards (application_id, seq);

-- An offer: its terms, in versions. A change of terms makes a new version (the old one `superseded`) whose
-- approvals start afresh. `expired` is written when a sent offer's `expires_at` has passed and something
-- needs the application's open place; reads show it as expired from that moment anyway.
CREATE TABLE IF NOT EXISTS offers (
    id               uuid           NOT NULL DEFAULT gen_random_uuid(),
    application_id   uuid           NOT NULL,
    job_id           uuid           NOT NULL,
    account_id       uuid           NOT NULL,
    candidate_id     uuid           NOT NULL,
    version          integer        NOT NULL,
    previous_id      uuid,
    status           text           NOT NULL,
    title            text           NOT NULL,
    start_date       date           NOT NULL,
    salary_amount    numeric        NOT NULL,
    salary_currency  text           NOT NULL,
    salary_period    text           NOT NULL,
    expires_at       timestamptz(0) NOT NULL,
    notes            text,
    created_by       uuid,
    sent_at          timestamptz(0),
    responded_at     timestamptz(0),
    response_note    text,
    created_at       timestamptz(0) NOT NULL DEFAULT now(),
    updated_at       timestamptz(0) NOT NULL DEFAULT now(),
    CONSTRAINT offers_pkey PRIMARY KEY (id),
    CONSTRAINT offers_application_fkey FOREIGN KEY (application_id) REFERENCES applications (id) ON DELETE CASCADE,
    CONSTRAINT offers_job_fkey FOREIGN KEY (job_id) REFERENCES jobs (id) ON DELETE CASCADE,
    CONSTRAINT offers_account_fkey FOREIGN KEY (account_id) REFERENCES accounts (id) ON DELETE CASCADE,
    CONSTRAINT offers_candidate_fkey FOREIGN KEY (candidate_id) REFERENCES users (id) ON DELETE CASCADE,
    CONSTRAINT offers_previous_fkey FOREIGN KEY (previous_id) REFERENCES offers (id) ON DELETE CASCADE,
    CONSTRAINT offers_created_by_fkey FOREIGN KEY (created_by) REFERENCES users (id) ON DELETE SET NULL,
    CONSTRAINT offers_status_check CHECK (status IN (
        'pending_approval', 'approved', 'rejected', 'sent', 'accepted', 'declined', 'expired', 'cancelled',
        'superseded')),
    CONSTRAINT offers_version_check CHECK (version >= 1),
    CONSTRAINT offers_salary_check CHECK (salary_amount > 0 AND salary_amount < 1e12 AND scale(salary_amount) <= 4
                                          AND salary_currency ~ '^[A-Z]{3}$'
                                          AND salary_period IN ('year', 'month', 'hour')),
    -- A version is followed by at most one (a change of its terms).
    CONSTRAINT offers_previous_key UNIQUE (previous_id)
);
-- An application has at most one open offer: a second is `409 conflict`.
CREATE UNIQUE INDEX IF NOT EXISTS offers_open_key ON offers (application_id)
    WHERE status IN ('pending_approval', 'approved', 'sent');
CREATE INDEX IF NOT EXISTS offers_application_idx ON offers (application_id, created_at DESC, version DESC);
CREATE INDEX IF NOT EXISTS offers_candidate_idx ON offers (candidate_id, created_at DESC, id DESC);

-- An offer's approvers, in the order they approve; `decision` NULL while pending.
CREATE TABLE IF NOT EXISTS offer_approvals (
    offer_id     uuid           NOT NULL,
    position     smallint       NOT NULL,
    approver_id  uuid           NOT NULL,
    decision     text,
    note         text,
    decided_at   timestamptz(0),
    CONSTRAINT offer_approvals_pkey PRIMARY KEY (offer_id, position),
    CONSTRAINT offer_approvals_offer_fkey FOREIGN KEY (offer_id) REFERENCES offers (id) ON DELETE CASCADE,
    CONSTRAINT offer_approvals_approver_fkey FOREIGN KEY (approver_id) REFERENCES users (id) ON DELETE CASCADE,
    CONSTRAINT offer_approvals_approver_key UNIQUE (offer_id, approver_id),
    CONSTRAINT offer_approvals_decision_check CHECK (decision IN ('approved', 'rejected')),
    CONSTRAINT offer_approvals_decided_check CHECK ((decision IS NULL) = (decided_at IS NULL))
);
-- Approvals waiting for one approver (their turn comes in order).
CREATE INDEX IF NOT EXISTS offer_approvals_approver_idx ON offer_approvals (approver_id) WHERE decision IS NULL;

-- ---------------------------------------------------------------------------------------------------
-- Job alerts (docs/alerts.md): saved searches that mail the new jobs they match
-- ---------------------------------------------------------------------------------------------------

-- A person's saved search: `jobs.search`'s parameters, and how often it mails; `last_sent_at` is the last
-- digest's time. Only a hash of the one-click unsubscribe token is kept.
CREATE TABLE IF NOT EXISTS job_alerts (
    id                uuid           NOT NULL,
    user_id           uuid           NOT NULL,
    q                 text,
    location          text,
    company           text,
    employment_type   text[],
    frequency         text           NOT NULL,
    unsubscribe_hash  bytea          NOT NULL,
    created_at        timestamptz(0) NOT NULL DEFAULT now(),
    last_sent_at      timestamptz,
    -- The published set's version when the alert was made: it takes the jobs of later versions only.
    since_version     bigint         NOT NULL DEFAULT 0,
    CONSTRAINT job_alerts_pkey PRIMARY KEY (id),
    CONSTRAINT job_alerts_unsubscribe_key UNIQUE (unsubscribe_hash),
    CONSTRAINT job_alerts_user_fkey FOREIGN KEY (user_id) REFERENCES users (id) ON DELETE CASCADE,
    CONSTRAINT job_alerts_frequency_check CHECK (frequency IN ('instant', 'daily'))
);
-- A person's alerts, oldest first (alerts.list, the panel's page, the limit of 20).
CREATE INDEX IF NOT EXISTS job_alerts_user_idx ON job_alerts (user_id, created_at, id);
-- The alerts created lately: each worker's alert index reads them as they come.
CREATE INDEX IF NOT EXISTS job_alerts_created_idx ON job_alerts (created_at);

-- Each job an alert matched, once: the key is what makes "never twice for one alert" hold. `sent_at` is set
-- when the alert's mail takes it (or drops it: closed meanwhile, or the person cannot be mailed). Written at
-- ~16,000 rows a second at scale (docs/alerts.md), so without foreign keys, whose checks cost a statement a
-- row: rows are written only for alerts that exist, go with their alert (the trigger below), and a job's rows
-- are read joined with the job.
CREATE TABLE IF NOT EXISTS job_alert_matches (
    alert_id    uuid        NOT NULL,
    job_id      uuid        NOT NULL,
    matched_at  timestamptz NOT NULL DEFAULT now(),
    sent_at     timestamptz,
    CONSTRAINT job_alert_matches_pkey PRIMARY KEY (alert_id, job_id)
);
-- An alert's waiting matches, without reading those it mailed long ago.
CREATE INDEX IF NOT EXISTS job_alert_matches_waiting_idx ON job_alert_matches (alert_id) WHERE sent_at IS NULL;

-- The alerts whose matches wait to be mailed, and from when: the first match plus ALERT_INSTANT_SECONDS, or the
-- last digest plus ALERT_DIGEST_SECONDS. A row of its own, so that the busiest write of matching inserts a
-- narrow row rather than updating the alert's.
CREATE TABLE IF NOT EXISTS job_alert_due (
    alert_id    uuid        NOT NULL,
    frequency   text        NOT NULL,
    due_at      timestamptz NOT NULL,
    CONSTRAINT job_alert_due_pkey PRIMARY KEY (alert_id),
    CONSTRAINT job_alert_due_alert_fkey FOREIGN KEY (alert_id) REFERENCES job_alerts (id) ON DELETE CASCADE,
    CONSTRAINT job_alert_due_frequency_check CHECK (frequency IN ('instant', 'daily'))
);
-- Due first, instant ones before digests.
CREATE INDEX IF NOT EXISTS job_alert_due_idx ON job_alert_due (frequency, due_at);

-- An alert's matches go with it, however it goes (alerts.delete, the unsubscribe link, erasure, an account).
CREATE OR REPLACE FUNCTION job_alerts_forget_matches() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM job_alert_matches WHERE alert_id IN (SELECT id FROM gone);
    RETURN NULL;
END
$$;
CREATE OR REPLACE TRIGGER job_alerts_forget_matches AFTER DELETE ON job_alerts
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION job_alerts_forget_matches();

-- How far the published set's versions have been matched against the alerts: advanced in the transaction
-- that writes the matches, so a publish committed is matched once whatever process dies when. `matched_at`
-- is when: should the log of changes no longer reach back to `version`, the jobs published since are matched.
CREATE TABLE IF NOT EXISTS job_alert_cursor (
    singleton   boolean     NOT NULL DEFAULT true,
    version     bigint      NOT NULL,
    matched_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT job_alert_cursor_pkey PRIMARY KEY (singleton),
    CONSTRAINT job_alert_cursor_singleton_check CHECK (singleton)
);
INSERT INTO job_alert_cursor (version)
SELECT coalesce((SELECT version FROM job_totals WHERE status = 'published'), 0)
ON CONFLICT DO NOTHING;

-- ---------------------------------------------------------------------------------------------------
-- Events (the transactional outbox): written in the transaction of the change they announce.
-- ---------------------------------------------------------------------------------------------------

CREATE TABLE IF NOT EXISTS events (
    -- The id is also the envelope's `idempotency_key`.
    id           uuid           NOT NULL,
    kind         text           NOT NULL,
    account_ids  uuid[]         NOT NULL,
    -- The webhook envelope rendered once: every attempt of every delivery sends these exact bytes.
    body         bytea          NOT NULL,
    created_at   timestamptz(0) NOT NULL,
    -- In the order of emission: events of one second are listed newest first by it (events.list).
    seq          bigint         GENERATED ALWAYS AS IDENTITY,
    CONSTRAINT events_pkey PRIMARY KEY (id)
);
CREATE INDEX IF NOT EXISTS events_created_idx ON events (created_at DESC);
-- events.list: an account's events (each belongs to every account in account_ids).
CREATE INDEX IF NOT EXISTS events_account_ids_idx ON events USING gin (account_ids);
-- Retention (rpc/privacy/retention.py): the oldest bodies still kept.
CREATE INDEX IF NOT EXISTS events_body_kept_idx ON events (created_at) WHERE body <> ''::bytea;

-- ---------------------------------------------------------------------------------------------------
-- Webhooks: endpoints, one delivery per (event, endpoint) chosen when the event is emitted, and every
-- attempt. The queue (procrastinate's tables) only wakes workers; these tables are the record.
-- ---------------------------------------------------------------------------------------------------

CREATE TABLE IF NOT EXISTS webhook_endpoints (
    id                      uuid           NOT NULL DEFAULT gen_random_uuid(),
    account_id              uuid           NOT NULL,
    url                     text           NOT NULL,
    event_kinds             text[]         NOT NULL,
    -- Sealed with SERVICE_SECRET_KEY: the secret must be read back to sign, and shown in the panel.
    secret_sealed           bytea          NOT NULL,
    -- During a rotation with overlap, the old secret still signs X-Service-Signature until overlap_until.
    previous_secret_sealed  bytea,
    overlap_until           timestamptz(0),
    enabled                 boolean        NOT NULL DEFAULT true,
    created_at              timestamptz(0) NOT NULL DEFAULT now(),
    updated_at              timestamptz(0) NOT NULL DEFAULT now(),
    -- When the attempts to it began to fail without a success since (NULL: its last attempt succeeded, or none
    -- was made); past WEBHOOK_DISABLE_AFTER_DAYS it is disabled (rpc/outbox/disabling.py).
    failing_since           timestamptz,
    -- When it was disabled for failing (NULL: enabled, or disabled by its owner).
    disabled_at             timestamptz(0),
    CONSTRAINT webhook_endpoints_pkey PRIMARY KEY (id),
    CONSTRAINT webhook_endpoints_account_fkey FOREIGN KEY (account_id) REFERENCES accounts (id) ON DELETE CASCADE,
    CONSTRAINT webhook_endpoints_url_check CHECK (url ~ '^https?://' AND length(url) <= 2000),
    CONSTRAINT webhook_endpoints_overlap_check CHECK ((previous_secret_sealed IS NULL) = (overlap_until IS NULL))
);
-- emit(): the endpoints of the event's accounts that subscribed to its kind (a disabled one keeps the event as a
-- failed delivery).
CREATE INDEX IF NOT EXISTS webhook_endpoints_account_all_idx ON webhook_endpoints (account_id);
-- The periodic disabling: the enabled endpoints that are failing.
CREATE INDEX IF NOT EXISTS webhook_endpoints_failing_idx ON webhook_endpoints (failing_since) WHERE enabled;

CREATE TABLE IF NOT EXISTS webhook_deliveries (
    id                uuid           NOT NULL DEFAULT gen_random_uuid(),
    event_id          uuid           NOT NULL,
    endpoint_id       uuid           NOT NULL,
    status            text           NOT NULL DEFAULT 'pending',
    -- Attempts made and recorded; a worker that dies mid-attempt records none, so recovery costs none.
    attempts          integer        NOT NULL DEFAULT 0,
    next_attempt_at   timestamptz,
    last_status_code  integer,
    last_error        text,
    created_at        timestamptz    NOT NULL DEFAULT now(),
    updated_at        timestamptz    NOT NULL DEFAULT now(),
    CONSTRAINT webhook_deliveries_pkey PRIMARY KEY (id),
    CONSTRAINT webhook_deliveries_event_fkey FOREIGN KEY (event_id) REFERENCES events (id) ON DELETE CASCADE,
    CONSTRAINT webhook_deliveries_endpoint_fkey
        FOREIGN KEY (endpoint_id) REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    CONSTRAINT webhook_deliveries_status_check CHECK (status IN ('pending', 'succeeded', 'failed')),
    CONSTRAINT webhook_deliveries_attempts_check CHECK (attempts >= 0)
);
-- The panel's delivery log of one endpoint, newest first; "redeliver all failed since T".
CREATE INDEX IF NOT EXISTS webhook_deliveries_endpoint_idx ON webhook_deliveries (endpoint_id, created_at DESC, id DESC);
-- An event's deliveries (to one endpoint, later than one): "redelivered already?", asked per failed delivery
-- when recovering thousands at once, must stay one index probe each.
CREATE INDEX IF NOT EXISTS webhook_deliveries_event_endpoint_idx
    ON webhook_deliveries (event_id, endpoint_id, created_at);

CREATE TABLE IF NOT EXISTS webhook_attempts (
    id                bigint         GENERATED ALWAYS AS IDENTITY,
    delivery_id       uuid           NOT NULL,
    number            integer        NOT NULL,
    started_at        timestamptz    NOT NULL,
    duration_ms       integer        NOT NULL,
    status_code       integer,
    error             text,
    -- The first KiB of the receiver's answer, for the panel.
    response_excerpt  text,
    -- The headers this attempt sent (signatures included; never a secret), for the panel.
    request_headers   jsonb,
    CONSTRAINT webhook_attempts_pkey PRIMARY KEY (id),
    CONSTRAINT webhook_attempts_delivery_fkey
        FOREIGN KEY (delivery_id) REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
    CONSTRAINT webhook_attempts_delivery_number_key UNIQUE (delivery_id, number)
);
CREATE INDEX IF NOT EXISTS webhook_attempts_started_idx ON webhook_attempts (started_at);  -- retention

-- ---------------------------------------------------------------------------------------------------
-- Billing: subscriptions to plans, their payments through the provider, invoices, and every provider
-- notification as received (audit).
-- ---------------------------------------------------------------------------------------------------

CREATE TABLE IF NOT EXISTS subscriptions (
    id                    uuid           NOT NULL DEFAULT gen_random_uuid(),
    account_id            uuid           NOT NULL,
    plan                  text           NOT NULL,
    status                text           NOT NULL DEFAULT 'pending',
    current_period_start  timestamptz(0),
    current_period_end    timestamptz(0),
    created_by            uuid,
    created_at            timestamptz(0) NOT NULL DEFAULT now(),
    updated_at            timestamptz(0) NOT NULL DEFAULT now(),
    cancelled_at          timestamptz(0),
    CONSTRAINT subscriptions_pkey PRIMARY KEY (id),
    CONSTRAINT subscriptions_account_fkey FOREIGN KEY (account_id) REFERENCES accounts (id) ON DELETE CASCADE,
    CONSTRAINT subscriptions_created_by_fkey FOREIGN KEY (created_by) REFERENCES users (id) ON DELETE SET NULL,
    CONSTRAINT subscriptions_status_check
        CHECK (status IN ('pending', 'active', 'cancelled', 'expired', 'failed')),
    CONSTRAINT subscriptions_period_check
        CHECK ((current_period_start IS NULL) = (current_period_end IS NULL)
               AND (current_period_end IS NULL OR current_period_end > current_period_start))
);
-- An account has at most one active subscription.
CREATE UNIQUE INDEX IF NOT EXISTS subscriptions_one_active_key ON subscriptions (account_id) WHERE status = 'active';
CREATE INDEX IF NOT EXISTS subscriptions_account_idx ON subscriptions (account_id, created_at DESC, id DESC);
-- The periodic expiry: active subscriptions whose period has ended.
CREATE INDEX IF NOT EXISTS subscriptions_period_end_idx ON subscriptions (current_period_end) WHERE status = 'active';

CREATE TABLE IF NOT EXISTS payments (
    id                  uuid           NOT NULL DEFAULT gen_random_uuid(),
    account_id          uuid           NOT NULL,
    subscription_id     uuid           NOT NULL,
    provider            text           NOT NULL,
    -- The order id the provider knows the payment by: unguessable, alphanumeric, the notification's key.
    merchant_oid        text           NOT NULL,
    amount              integer        NOT NULL,
    currency            text           NOT NULL,
    status              text           NOT NULL DEFAULT 'pending',
    failed_reason       text,
    failed_reason_code  text,
    flagged_for_review  boolean        NOT NULL DEFAULT false,
    created_at          timestamptz(0) NOT NULL DEFAULT now(),
    updated_at          timestamptz(0) NOT NULL DEFAULT now(),
    completed_at        timestamptz(0),
    -- Set while billing.subscriptions.create waits on the provider for this payment's checkout (at most two
    -- per account at once); cleared when the provider has answered.
    checkout_requested_at  timestamptz(0),
    CONSTRAINT payments_pkey PRIMARY KEY (id),
    CONSTRAINT payments_account_fkey FOREIGN KEY (account_id) REFERENCES accounts (id) ON DELETE CASCADE,
    CONSTRAINT payments_subscription_fkey
        FOREIGN KEY (subscription_id) REFERENCES subscriptions (id) ON DELETE CASCADE,
    CONSTRAINT payments_merchant_oid_key UNIQUE (merchant_oid),
    CONSTRAINT payments_merchant_oid_check CHECK (merchant_oid ~ '^[A-Za-z0-9]{1,64}$'),
    CONSTRAINT payments_amount_check CHECK (amount > 0),
    CONSTRAINT payments_status_check CHECK (status IN ('pending', 'completed', 'failed'))
);
CREATE INDEX IF NOT EXISTS payments_account_idx ON payments (account_id, created_at DESC, id DESC);
CREATE INDEX IF NOT EXISTS payments_subscription_idx ON payments (subscription_id);
CREATE INDEX IF NOT EXISTS payments_checkout_waiting_idx ON payments (account_id, checkout_requested_at)
    WHERE checkout_requested_at IS NOT NULL;

-- Invoice numbers run without gaps within a year: the counter row is taken in the transaction that
-- completes the payment, so a number is used exactly when its invoice commits.
CREATE TABLE IF NOT EXISTS invoice_counters (
    year         integer NOT NULL,
    last_number  integer NOT NULL,
    CONSTRAINT invoice_counters_pkey PRIMARY KEY (year)
);

CREATE TABLE IF NOT EXISTS invoices (
    id          uuid           NOT NULL DEFAULT gen_random_uuid(),
    account_id  uuid           NOT NULL,
    payment_id  uuid           NOT NULL,
    number      text           NOT NULL,
    amount      integer        NOT NULL,
    currency    text           NOT NULL,
    line_items  jsonb          NOT NULL,
    issued_at   timestamptz(0) NOT NULL DEFAULT now(),
    CONSTRAINT invoices_pkey PRIMARY KEY (id),
    CONSTRAINT invoices_account_fkey FOREIGN KEY (account_id) REFERENCES accounts (id) ON DELETE CASCADE,
    CONSTRAINT invoices_payment_fkey FOREIGN KEY (payment_id) REFERENCES payments (id) ON DELETE CASCADE,
    -- One invoice per payment, whatever the provider repeats.
    CONSTRAINT invoices_payment_key UNIQUE (payment_id),
    CONSTRAINT invoices_number_key UNIQUE (number)
);
CREATE INDEX IF NOT EXISTS invoices_account_idx ON invoices (account_id, issued_at DESC, id DESC);

CREATE TABLE IF NOT EXISTS payment_notifications (
    id              bigint         GENERATED ALWAYS AS IDENTITY,
    provider        text           NOT NULL,
    received_at     timestamptz    NOT NULL DEFAULT now(),
    remote_address  text,
    merchant_oid    text,
    fields          jsonb          NOT NULL,
    -- What was made of it: applied, duplicate, invalid_hash, unknown_order, ...
    verdict         text           NOT NULL,
    CONSTRAINT payment_notifications_pkey PRIMARY KEY (id)
);
CREATE INDEX IF NOT EXISTS payment_notifications_merchant_oid_idx ON payment_notifications (merchant_oid);

-- ---------------------------------------------------------------------------------------------------
-- OAuth and web sessions: third-party applications (clients), the authorizations people give them
-- (grants), their one-time codes and rotating refresh tokens, and the browser sessions of the web
-- sign-in. Every secret here (client secret, code, refresh token, session id) is kept as a SHA-256 hash.
-- ---------------------------------------------------------------------------------------------------

-- A third-party application, owned by an account. Confidential clients have a secret (shown once);
-- public ones (browser and native apps, which cannot keep one) have none and rely on PKCE alone.
-- Redirect URIs are matched exactly (RFC 9700 section 4.1); `scopes` are the most the client may ask for.
CREATE TABLE IF NOT EXISTS oauth_clients (
    id             text           NOT NULL,
    account_id     uuid           NOT NULL,
    created_by     uuid,
    name           text           NOT NULL,
    secret_hash    bytea,
    redirect_uris  text[]         NOT NULL,
    scopes         text[]         NOT NULL,
    created_at     timestamptz(0) NOT NULL DEFAULT now(),
    updated_at     timestamptz(0) NOT NULL DEFAULT now(),
    CONSTRAINT oauth_clients_pkey PRIMARY KEY (id),
    CONSTRAINT oauth_clients_account_fkey FOREIGN KEY (account_id) REFERENCES accounts (id) ON DELETE CASCADE,
    CONSTRAINT oauth_clients_created_by_fkey FOREIGN KEY (created_by) REFERENCES users (id) ON DELETE SET NULL,
    CONSTRAINT oauth_clients_id_check CHECK (id ~ '^[A-Za-z0-9_-]{1,64}$'),
    CONSTRAINT oauth_clients_name_check CHECK (length(name) BETWEEN 1 AND 100),
    CONSTRAINT oauth_clients_redirect_uris_check CHECK (cardinality(redirect_uris) BETWEEN 1 AND 20),
    CONSTRAINT oauth_clients_scopes_check CHECK (cardinality(scopes) >= 1)
);
CREATE INDEX IF NOT EXISTS oauth_clients_account_idx ON oauth_clients (account_id);

-- One authorization a person gave one client (a consent followed by a code exchange). Its refresh tokens
-- form one family, and every access token carries its id: revoking the grant (code reuse, refresh-token
-- reuse, /oauth/revoke, "revoke access") stops all of them at the next request. `expires_at` follows the
-- newest refresh token, so a grant nobody refreshed for 30 days drops out of the user's list.
CREATE TABLE IF NOT EXISTS oauth_grants (
    id            uuid           NOT NULL DEFAULT gen_random_uuid(),
    client_id     text           NOT NULL,
    user_id       uuid           NOT NULL,
    scopes        text[]         NOT NULL,
    created_at    timestamptz(0) NOT NULL DEFAULT now(),
    last_used_at  timestamptz(0),
    expires_at    timestamptz(0) NOT NULL,
    revoked_at    timestamptz(0),
    CONSTRAINT oauth_grants_pkey PRIMARY KEY (id),
    CONSTRAINT oauth_grants_client_fkey FOREIGN KEY (client_id) REFERENCES oauth_clients (id) ON DELETE CASCADE,
    CONSTRAINT oauth_grants_user_fkey FOREIGN KEY (user_id) REFERENCES users (id) ON DELETE CASCADE
);
-- A person's authorized applications, and "revoke access" to one of them.
CREATE INDEX IF NOT EXISTS oauth_grants_user_idx ON oauth_grants (user_id, client_id) WHERE revoked_at IS NULL;
CREATE INDEX IF NOT EXISTS oauth_grants_client_idx ON oauth_grants (client_id);

-- Authorization codes: 10 minutes, one use, bound to the client, redirect URI, user, scopes and the PKCE
-- challenge. The row outlives its use so that a second use can revoke the grant the first one created.
CREATE TABLE IF NOT EXISTS oauth_codes (
    id              uuid           NOT NULL DEFAULT gen_random_uuid(),
    code_hash       bytea          NOT NULL,
    client_id       text           NOT NULL,
    user_id         uuid           NOT NULL,
    redirect_uri    text           NOT NULL,
    scopes          text[]         NOT NULL,
    code_challenge  text           NOT NULL,
    created_at      timestamptz(0) NOT NULL DEFAULT now(),
    expires_at      timestamptz(0) NOT NULL,
    used_at         timestamptz(0),
    grant_id        uuid,
    CONSTRAINT oauth_codes_pkey PRIMARY KEY (id),
    CONSTRAINT oauth_codes_code_hash_key UNIQUE (code_hash),
    CONSTRAINT oauth_codes_client_fkey FOREIGN KEY (client_id) REFERENCES oauth_clients (id) ON DELETE CASCADE,
    CONSTRAINT oauth_codes_user_fkey FOREIGN KEY (user_id) REFERENCES users (id) ON DELETE CASCADE,
    CONSTRAINT oauth_codes_grant_fkey FOREIGN KEY (grant_id) REFERENCES oauth_grants (id) ON DELETE SET NULL,
    CONSTRAINT oauth_codes_code_challenge_check CHECK (code_challenge ~ '^[A-Za-z0-9_-]{43}$')
);
CREATE INDEX IF NOT EXISTS oauth_codes_expires_idx ON oauth_codes (expires_at);
CREATE INDEX IF NOT EXISTS oauth_codes_user_idx ON oauth_codes (user_id, client_id) WHERE used_at IS NULL;
CREATE INDEX IF NOT EXISTS oauth_codes_grant_idx ON oauth_codes (grant_id);

-- Refresh tokens of OAuth grants: each rotation marks the presented token used and adds a new one; a used
-- token presented again revokes its grant (RFC 9700 section 4.14.2).
CREATE TABLE IF NOT EXISTS oauth_refresh_tokens (
    id          uuid           NOT NULL DEFAULT gen_random_uuid(),
    grant_id    uuid           NOT NULL,
    token_hash  bytea          NOT NULL,
    created_at  timestamptz(0) NOT NULL DEFAULT now(),
    expires_at  timestamptz(0) NOT NULL,
    used_at     timestamptz(0),
    CONSTRAINT oauth_refresh_tokens_pkey PRIMARY KEY (id),
    CONSTRAINT oauth_refresh_tokens_grant_fkey FOREIGN KEY (grant_id) REFERENCES oauth_grants (id) ON DELETE CASCADE,
    CONSTRAINT oauth_refresh_tokens_token_hash_key UNIQUE (token_hash)
);
CREATE INDEX IF NOT EXISTS oauth_refresh_tokens_grant_idx ON oauth_refresh_tokens (grant_id);
CREATE INDEX IF NOT EXISTS oauth_refresh_tokens_expires_idx ON oauth_refresh_tokens (expires_at);

-- Browser sessions of the web sign-in (consent page, panel): the cookie holds a random id, the row its hash.
CREATE TABLE IF NOT EXISTS web_sessions (
    id          uuid           NOT NULL DEFAULT gen_random_uuid(),
    token_hash  bytea          NOT NULL,
    user_id     uuid           NOT NULL,
    created_at  timestamptz(0) NOT NULL DEFAULT now(),
    expires_at  timestamptz(0) NOT NULL,
    CONSTRAINT web_sessions_pkey PRIMARY KEY (id),
    CONSTRAINT web_sessions_user_fkey FOREIGN KEY (user_id) REFERENCES users (id) ON DELETE CASCADE,
    CONSTRAINT web_sessions_token_hash_key UNIQUE (token_hash)
);
CREATE INDEX IF NOT EXISTS web_sessions_user_idx ON web_sessions (user_id);
CREATE INDEX IF NOT EXISTS web_sessions_expires_idx ON web_sessions (expires_at);

-- A secret the panel has just made (a new API key, webhook signing secret or OAuth client secret), kept only for
-- the one page the form's redirect leads to (post/redirect/get): sealed, bound to the browser session that made
-- it, found by the SHA-256 of a random token in that page's address, deleted when shown or after ten minutes.
CREATE TABLE IF NOT EXISTS panel_reveals (
    token_hash     bytea          NOT NULL,
    session_hash   bytea          NOT NULL,
    kind           text           NOT NULL,
    object_id      text           NOT NULL,
    secret_sealed  bytea,
    expires_at     timestamptz(0) NOT NULL,
    CONSTRAINT panel_reveals_pkey PRIMARY KEY (token_hash),
    CONSTRAINT panel_reveals_session_fkey
        FOREIGN KEY (session_hash) REFERENCES web_sessions (token_hash) ON DELETE CASCADE
);
CREATE INDEX IF NOT EXISTS panel_reveals_session_idx ON panel_reveals (session_hash);
CREATE INDEX IF NOT EXISTS panel_reveals_expires_idx ON panel_reveals (expires_at);

-- ---------------------------------------------------------------------------------------------------
-- Idempotent writes (README.md, docs/security.md): the answer a write gave, kept 24 hours under the account's key, in the
-- transaction of the write itself. `lease_until` is set only while a write that calls another service runs
-- (its claim is committed before it waits); `status` and `body` once the answer is kept.
-- ---------------------------------------------------------------------------------------------------

CREATE TABLE IF NOT EXISTS idempotency_keys (
    account_id   uuid           NOT NULL,
    key          text           NOT NULL,
    procedure    text           NOT NULL,
    -- SHA-256 of the parameters as canonical JSON.
    fingerprint  bytea          NOT NULL,
    status       integer,
    body         bytea,
    created_at   timestamptz(0) NOT NULL DEFAULT now(),
    expires_at   timestamptz(0) NOT NULL,
    lease_until  timestamptz,
    -- '' for a procedure about the account; the calling person's id for one about that person (`profile.*`),
    -- so that two members' keys for those never meet.
    scope        text           NOT NULL DEFAULT '',
    -- Who called: erasing a person deletes their keys (the kept answers may repeat what they wrote).
    user_id      uuid,
    -- What a call that opens several transactions (`calls_out`) has stored so far, written in the transaction
    -- that stored it; NULL while nothing is. A call that failed past that keeps its key, and a retry with the
    -- key resumes from it instead of doing the work twice.
    progress     jsonb,
    CONSTRAINT idempotency_keys_pkey PRIMARY KEY (account_id, scope, key),
    CONSTRAINT idempotency_keys_account_fkey FOREIGN KEY (account_id) REFERENCES accounts (id) ON DELETE CASCADE,
    CONSTRAINT idempotency_keys_kept_check CHECK ((status IS NULL) = (body IS NULL)),
    CONSTRAINT idempotency_keys_key_check CHECK (key ~ '^[\x20-\x7e]{1,255}$')
);
-- The purge of keys past their 24 hours.
CREATE INDEX IF NOT EXISTS idempotency_keys_expires_idx ON idempotency_keys (expires_at);
-- Erasure (rpc/privacy/erasure.py).
CREATE INDEX IF NOT EXISTS idempotency_keys_user_idx ON idempotency_keys (user_id);

-- ---------------------------------------------------------------------------------------------------
-- The audit log (docs/privacy.md): append-only, each entry chained to the one before by the
-- SHA-256 of its canonical form (`rpc.audit.log`). Writers take the chain's head row FOR UPDATE, so entries
-- are chained in id order and the chain never forks.
-- ---------------------------------------------------------------------------------------------------

CREATE TABLE IF NOT EXISTS audit_entries (
    id              bigint         NOT NULL,
    at              timestamptz    NOT NULL,
    -- NULL: a platform-wide entry (a failed sign-in for an unknown e-mail), seen by platform admins only.
    account_id      uuid,
    actor_kind      text           NOT NULL,
    actor_id        text,
    action          text           NOT NULL,
    target_id       text,
    client_address  text,
    user_agent      text,
    prev_hash       bytea          NOT NULL,
    hash            bytea          NOT NULL,
    CONSTRAINT audit_entries_pkey PRIMARY KEY (id),
    CONSTRAINT audit_entries_actor_kind_check CHECK (actor_kind IN ('user', 'operator', 'oauth_client'))
);
CREATE SEQUENCE IF NOT EXISTS audit_entries_id_seq AS bigint OWNED BY audit_entries.id;
-- audit.list: one account's entries newest first (every filter narrows this walk), and the whole log's.
CREATE INDEX IF NOT EXISTS audit_entries_account_idx ON audit_entries (account_id, id DESC);
CREATE INDEX IF NOT EXISTS audit_entries_at_idx ON audit_entries (at);
-- profile.export: what a person did, and what was done to them.
CREATE INDEX IF NOT EXISTS audit_entries_actor_idx ON audit_entries (actor_id) WHERE actor_kind = 'user';
CREATE INDEX IF NOT EXISTS audit_entries_target_idx ON audit_entries (target_id);

-- The chain's head (the newest entry's hash) and its anchor: the hash the oldest kept entry follows, moved
-- forward when retention deletes the oldest entries, so that the rest still verifies from it.
CREATE TABLE IF NOT EXISTS audit_chain (
    singleton    boolean  NOT NULL DEFAULT true,
    head_hash    bytea    NOT NULL,
    anchor_hash  bytea    NOT NULL,
    CONSTRAINT audit_chain_pkey PRIMARY KEY (singleton),
    CONSTRAINT audit_chain_singleton_check CHECK (singleton)
);
INSERT INTO audit_chain (head_hash, anchor_hash) VALUES (decode(repeat('00', 32), 'hex'), decode(repeat('00', 32), 'hex'))
ON CONFLICT DO NOTHING;

-- Append-only: no UPDATE ever, and DELETE only of entries past the audit retention (400 days), which
-- `rpc.privacy.retention` does oldest first while moving the anchor.
CREATE OR REPLACE FUNCTION audit_entries_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' AND OLD.at < now() - interval '400 days' THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'audit entries are append-only' USING ERRCODE = 'insufficient_privilege';
END
$$;
CREATE OR REPLACE TRIGGER audit_entries_append_only BEFORE UPDATE OR DELETE ON audit_entries
    FOR EACH ROW EXECUTE FUNCTION audit_entries_append_only();
CREATE OR REPLACE TRIGGER audit_entries_no_truncate BEFORE TRUNCATE ON audit_entries
    FOR EACH STATEMENT EXECUTE FUNCTION audit_entries_append_only();
