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
    CONSTRAINT jobs_pkey PRIMARY KEY (id),
    CONSTRAINT jobs_account_fkey FOREIGN KEY (account_id) REFERENCES accounts (id) ON DELETE CASCADE,
    CONSTRAINT jobs_created_by_fkey FOREIGN KEY (created_by) REFERENCES users (id) ON DELETE SET NULL,
    CONSTRAINT jobs_status_check CHECK (status IN ('draft', 'published', 'closed')),
    CONSTRAINT jobs_employment_type_check
        CHECK (employment_type IN ('full_time', 'part_time', 'contract', 'internship', 'temporary'))
);
-- The public list: published jobs, newest first.
CREATE INDEX IF NOT EXISTS jobs_published_idx ON jobs (created_at DESC, id DESC) WHERE status = 'published';
-- `mine=true`: one account's jobs in every status, newest first.
CREATE INDEX IF NOT EXISTS jobs_account_idx ON jobs (account_id, created_at DESC, id DESC);
-- Case-insensitive substring filters (`q` on title or company, `location`, `company`).
CREATE INDEX IF NOT EXISTS jobs_title_trgm_idx ON jobs USING gin (title gin_trgm_ops);
CREATE INDEX IF NOT EXISTS jobs_company_trgm_idx ON jobs USING gin (company gin_trgm_ops);
CREATE INDEX IF NOT EXISTS jobs_location_trgm_idx ON jobs USING gin (location gin_trgm_ops);

-- The number of published jobs, kept in the transactions that publish and close jobs, so that the public
-- list never counts a million rows. Drafts do not touch it: creating jobs never contends on this row.
CREATE TABLE IF NOT EXISTS job_totals (
    status  text   NOT NULL,
    total   bigint NOT NULL DEFAULT 0,
    CONSTRAINT job_totals_pkey PRIMARY KEY (status),
    CONSTRAINT job_totals_status_check CHECK (status = 'published'),
    CONSTRAINT job_totals_total_check CHECK (total >= 0)
);
CREATE OR REPLACE FUNCTION jobs_count_published() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') AND OLD.status = 'published' THEN
        UPDATE job_totals SET total = total - 1 WHERE status = 'published';
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') AND NEW.status = 'published' THEN
        UPDATE job_totals SET total = total + 1 WHERE status = 'published';
    END IF;
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER jobs_count_insert_delete AFTER INSERT OR DELETE ON jobs
    FOR EACH ROW EXECUTE FUNCTION jobs_count_published();
CREATE OR REPLACE TRIGGER jobs_count_status_change AFTER UPDATE OF status ON jobs
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status) EXECUTE FUNCTION jobs_count_published();

-- Seeded from the jobs themselves, so that a database older than the counter starts exact. After the
-- triggers: creating them locks out writers to `jobs` until this transaction commits, so none is missed.
INSERT INTO job_totals (status, total)
SELECT 'published', count(*) FROM jobs WHERE status = 'published'
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
    CONSTRAINT events_pkey PRIMARY KEY (id)
);
CREATE INDEX IF NOT EXISTS events_created_idx ON events (created_at DESC);

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
    CONSTRAINT webhook_endpoints_pkey PRIMARY KEY (id),
    CONSTRAINT webhook_endpoints_account_fkey FOREIGN KEY (account_id) REFERENCES accounts (id) ON DELETE CASCADE,
    CONSTRAINT webhook_endpoints_url_check CHECK (url ~ '^https?://' AND length(url) <= 2000),
    CONSTRAINT webhook_endpoints_overlap_check CHECK ((previous_secret_sealed IS NULL) = (overlap_until IS NULL))
);
-- emit(): the enabled endpoints of the event's accounts that subscribed to its kind.
CREATE INDEX IF NOT EXISTS webhook_endpoints_account_idx ON webhook_endpoints (account_id) WHERE enabled;

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
CREATE INDEX IF NOT EXISTS webhook_deliveries_event_idx ON webhook_deliveries (event_id);

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
    CONSTRAINT webhook_attempts_pkey PRIMARY KEY (id),
    CONSTRAINT webhook_attempts_delivery_fkey
        FOREIGN KEY (delivery_id) REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
    CONSTRAINT webhook_attempts_delivery_number_key UNIQUE (delivery_id, number)
);

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
