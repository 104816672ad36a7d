-- rowgate's built-in accounts on PostgreSQL (`rowgate accounts install`), where Supabase Auth
-- keeps them: `auth.users`, `auth.identities`, `auth.sessions` and `auth.refresh_tokens`, with
-- Supabase's columns, so a schema's `REFERENCES auth.users (id)`, its triggers on `auth.users`
-- and its policies on `auth.uid()` work unchanged (and a Supabase project's users, whose
-- tables are these, keep signing in). No API role may read the tables: the serving role
-- reaches them only through the SECURITY DEFINER functions in schema `rowgate`, each doing
-- one step. Refresh tokens are kept as SHA-256 hashes (GoTrue keeps them in the clear);
-- passwords as Argon2id hashes made by rowgate (GoTrue reads those too; rowgate reads
-- GoTrue's bcrypt ones).
-- Objects someone else made first are not reused: their owner could read the hashes or
-- replace the functions.
DO $$
DECLARE who text;
BEGIN
  SELECT r.rolname INTO who FROM pg_namespace n JOIN pg_roles r ON r.oid = n.nspowner
    WHERE n.nspname = 'rowgate' AND r.rolname <> current_user;
  IF who IS NOT NULL AND NOT (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
    RAISE EXCEPTION 'schema rowgate belongs to %, not to %: install as its owner or a superuser', who, current_user;
  END IF;
  SELECT r.rolname INTO who FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    JOIN pg_roles r ON r.oid = c.relowner
    WHERE ((n.nspname = 'rowgate' AND c.relname IN ('users', 'refresh_tokens'))
        OR (n.nspname = 'auth' AND c.relname IN ('users', 'identities', 'sessions', 'refresh_tokens')))
      AND r.rolname <> current_user
    LIMIT 1;
  IF who IS NOT NULL THEN
    RAISE EXCEPTION 'the accounts tables belong to %, who could read their password hashes: drop them or install as %', who, who;
  END IF;
END $$;
CREATE SCHEMA IF NOT EXISTS rowgate;

DO $$ BEGIN
  CREATE TYPE auth.aal_level AS ENUM ('aal1', 'aal2', 'aal3');
EXCEPTION WHEN duplicate_object THEN NULL; END $$;

CREATE TABLE IF NOT EXISTS auth.users (
  instance_id uuid,
  id uuid NOT NULL PRIMARY KEY,
  aud varchar(255),
  role varchar(255),
  email varchar(255),
  encrypted_password varchar(255),
  email_confirmed_at timestamptz,
  invited_at timestamptz,
  confirmation_token varchar(255),
  confirmation_sent_at timestamptz,
  recovery_token varchar(255),
  recovery_sent_at timestamptz,
  email_change_token_new varchar(255),
  email_change varchar(255),
  email_change_sent_at timestamptz,
  last_sign_in_at timestamptz,
  raw_app_meta_data jsonb,
  raw_user_meta_data jsonb,
  is_super_admin boolean,
  created_at timestamptz,
  updated_at timestamptz,
  phone text UNIQUE DEFAULT NULL,
  phone_confirmed_at timestamptz,
  phone_change text DEFAULT '',
  phone_change_token varchar(255) DEFAULT '',
  phone_change_sent_at timestamptz,
  confirmed_at timestamptz GENERATED ALWAYS AS (LEAST(email_confirmed_at, phone_confirmed_at)) STORED,
  email_change_token_current varchar(255) DEFAULT '',
  email_change_confirm_status smallint DEFAULT 0 CHECK (email_change_confirm_status >= 0 AND email_change_confirm_status <= 2),
  banned_until timestamptz,
  reauthentication_token varchar(255) DEFAULT '',
  reauthentication_sent_at timestamptz,
  is_sso_user boolean NOT NULL DEFAULT false,
  deleted_at timestamptz,
  is_anonymous boolean NOT NULL DEFAULT false
);
CREATE UNIQUE INDEX IF NOT EXISTS users_email_partial_key ON auth.users (email) WHERE is_sso_user = false;
CREATE INDEX IF NOT EXISTS users_instance_id_email_idx ON auth.users (instance_id, lower(email));
CREATE INDEX IF NOT EXISTS users_created_at_idx ON auth.users (created_at DESC, id);
-- Codes sent by mail are looked up by their hash (Supabase's index names and conditions).
CREATE UNIQUE INDEX IF NOT EXISTS confirmation_token_idx ON auth.users (confirmation_token) WHERE confirmation_token !~ '^[0-9 ]*$';
CREATE UNIQUE INDEX IF NOT EXISTS recovery_token_idx ON auth.users (recovery_token) WHERE recovery_token !~ '^[0-9 ]*$';
CREATE UNIQUE INDEX IF NOT EXISTS email_change_token_new_idx ON auth.users (email_change_token_new) WHERE email_change_token_new !~ '^[0-9 ]*$';
CREATE UNIQUE INDEX IF NOT EXISTS email_change_token_current_idx ON auth.users (email_change_token_current) WHERE email_change_token_current !~ '^[0-9 ]*$';
CREATE UNIQUE INDEX IF NOT EXISTS reauthentication_token_idx ON auth.users (reauthentication_token) WHERE reauthentication_token !~ '^[0-9 ]*$';
-- rowgate's: GoTrue finds a phone change by its number.
CREATE INDEX IF NOT EXISTS rowgate_phone_change_token_idx ON auth.users (phone_change_token) WHERE phone_change_token !~ '^[0-9 ]*$';

CREATE TABLE IF NOT EXISTS auth.identities (
  provider_id text NOT NULL,
  user_id uuid NOT NULL REFERENCES auth.users (id) ON DELETE CASCADE,
  identity_data jsonb NOT NULL,
  provider text NOT NULL,
  last_sign_in_at timestamptz,
  created_at timestamptz,
  updated_at timestamptz,
  email text GENERATED ALWAYS AS (lower(identity_data ->> 'email')) STORED,
  id uuid NOT NULL DEFAULT gen_random_uuid() PRIMARY KEY,
  CONSTRAINT identities_provider_id_provider_unique UNIQUE (provider_id, provider)
);
CREATE INDEX IF NOT EXISTS identities_user_id_idx ON auth.identities (user_id);

CREATE TABLE IF NOT EXISTS auth.sessions (
  id uuid NOT NULL PRIMARY KEY,
  user_id uuid NOT NULL REFERENCES auth.users (id) ON DELETE CASCADE,
  created_at timestamptz,
  updated_at timestamptz,
  factor_id uuid,
  aal auth.aal_level,
  not_after timestamptz,
  refreshed_at timestamp,
  user_agent text,
  ip inet,
  tag text
);
CREATE INDEX IF NOT EXISTS sessions_user_id_idx ON auth.sessions (user_id);
-- The application holding a session that rowgate as an OAuth server issued, and the scopes its
-- user granted (GoTrue's columns; the foreign key is oauth_server.sql's).
ALTER TABLE auth.sessions ADD COLUMN IF NOT EXISTS oauth_client_id uuid;
ALTER TABLE auth.sessions ADD COLUMN IF NOT EXISTS scopes text;

CREATE TABLE IF NOT EXISTS auth.refresh_tokens (
  instance_id uuid,
  id bigserial PRIMARY KEY,
  token varchar(255) UNIQUE,
  user_id varchar(255),
  revoked boolean,
  created_at timestamptz,
  updated_at timestamptz,
  parent varchar(255),
  session_id uuid REFERENCES auth.sessions (id) ON DELETE CASCADE
);
CREATE INDEX IF NOT EXISTS refresh_tokens_user_id_idx ON auth.refresh_tokens (user_id);
CREATE INDEX IF NOT EXISTS refresh_tokens_session_id_revoked_idx ON auth.refresh_tokens (session_id, revoked);

DO $$ BEGIN
  CREATE TYPE auth.factor_type AS ENUM ('totp', 'webauthn', 'phone');
EXCEPTION WHEN duplicate_object THEN NULL; END $$;
DO $$ BEGIN
  CREATE TYPE auth.factor_status AS ENUM ('unverified', 'verified');
EXCEPTION WHEN duplicate_object THEN NULL; END $$;

CREATE TABLE IF NOT EXISTS auth.mfa_factors (
  id uuid NOT NULL PRIMARY KEY,
  user_id uuid NOT NULL REFERENCES auth.users (id) ON DELETE CASCADE,
  friendly_name text,
  factor_type auth.factor_type NOT NULL,
  status auth.factor_status NOT NULL,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  secret text,
  phone text,
  last_challenged_at timestamptz
);
CREATE INDEX IF NOT EXISTS factor_id_created_at_idx ON auth.mfa_factors (user_id, created_at);
ALTER TABLE auth.mfa_factors ADD COLUMN IF NOT EXISTS web_authn_credential jsonb;
ALTER TABLE auth.mfa_factors ADD COLUMN IF NOT EXISTS web_authn_aaguid uuid;

CREATE TABLE IF NOT EXISTS auth.mfa_challenges (
  id uuid NOT NULL PRIMARY KEY,
  factor_id uuid NOT NULL REFERENCES auth.mfa_factors (id) ON DELETE CASCADE,
  created_at timestamptz NOT NULL,
  verified_at timestamptz,
  ip_address inet,
  otp_code text
);
ALTER TABLE auth.mfa_challenges ADD COLUMN IF NOT EXISTS web_authn_session_data jsonb;

CREATE TABLE IF NOT EXISTS auth.mfa_amr_claims (
  session_id uuid NOT NULL REFERENCES auth.sessions (id) ON DELETE CASCADE,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  authentication_method text NOT NULL,
  id uuid NOT NULL PRIMARY KEY,
  CONSTRAINT mfa_amr_claims_session_id_authentication_method_pkey UNIQUE (session_id, authentication_method)
);

DO $$ BEGIN
  CREATE TYPE auth.code_challenge_method AS ENUM ('s256', 'plain');
EXCEPTION WHEN duplicate_object THEN NULL; END $$;

CREATE TABLE IF NOT EXISTS auth.flow_state (
  id uuid NOT NULL PRIMARY KEY,
  user_id uuid,
  auth_code text NOT NULL,
  code_challenge_method auth.code_challenge_method NOT NULL,
  code_challenge text NOT NULL,
  provider_type text NOT NULL,
  provider_access_token text,
  provider_refresh_token text,
  created_at timestamptz,
  updated_at timestamptz,
  authentication_method text NOT NULL,
  auth_code_issued_at timestamptz
);
CREATE INDEX IF NOT EXISTS idx_auth_code ON auth.flow_state (auth_code);
CREATE INDEX IF NOT EXISTS idx_user_id_auth_method ON auth.flow_state (user_id, authentication_method);

REVOKE ALL ON auth.users, auth.identities, auth.sessions, auth.refresh_tokens, auth.mfa_factors,
  auth.mfa_challenges, auth.mfa_amr_claims, auth.flow_state FROM PUBLIC;

-- Accounts made before they moved to schema auth (rowgate 0.x kept them in schema rowgate):
-- moved over once, their sessions with them, then the old tables dropped. Addresses are
-- lowercased as GoTrue keeps them; the old index was on lower(email), so none collide.
DO $$
BEGIN
  IF to_regclass('rowgate.users') IS NOT NULL THEN
    INSERT INTO auth.users (id, aud, role, email, encrypted_password, email_confirmed_at, created_at, updated_at,
                            raw_app_meta_data, raw_user_meta_data)
      SELECT u.id::uuid, 'authenticated', 'authenticated', lower(u.email), u.password_hash,
             NULL, u.created_at::timestamptz, u.created_at::timestamptz,
             '{"provider": "email", "providers": ["email"]}', '{}'
      FROM rowgate.users u ON CONFLICT DO NOTHING;
    INSERT INTO auth.identities (id, provider_id, user_id, identity_data, provider, created_at, updated_at)
      SELECT u.id::uuid, u.id, u.id::uuid,
             jsonb_build_object('sub', u.id, 'email', lower(u.email), 'email_verified', false, 'phone_verified', false),
             'email', u.created_at::timestamptz, u.created_at::timestamptz
      FROM rowgate.users u ON CONFLICT DO NOTHING;
    IF to_regclass('rowgate.refresh_tokens') IS NOT NULL THEN
      -- Kept so that signed-in users stay signed in; a token then lived 30 days from its issue.
      INSERT INTO auth.refresh_tokens (token, user_id, revoked, created_at, updated_at)
        SELECT t.token_hash, t.user_id, t.revoked, to_timestamp(t.expires_at - 30 * 86400),
               coalesce(to_timestamp(t.revoked_at), to_timestamp(t.expires_at - 30 * 86400))
        FROM rowgate.refresh_tokens t ON CONFLICT DO NOTHING;
      DROP TABLE rowgate.refresh_tokens;
    END IF;
    DROP TABLE rowgate.users;
  END IF;
END $$;

-- What the functions below answer about an account: GoTrue's user, timestamps as RFC 3339 text,
-- metadata as JSON text; `password_hash` and `session_id` only where a function says so.
DROP TYPE IF EXISTS rowgate.account CASCADE;
CREATE TYPE rowgate.account AS (
  id text, email text, phone text, role text, created_at text, updated_at text,
  email_confirmed_at text, last_sign_in_at text, banned_until text, is_banned boolean,
  app_metadata text, user_metadata text, is_anonymous boolean,
  password_hash text, session_id text,
  confirmation_sent_at text, recovery_sent_at text, email_change_sent_at text, new_email text,
  factors text, aal text, session_started bigint, identities text, invited_at text, session_method text,
  email_verified boolean, second_factor text, session_client text, session_scopes text,
  phone_confirmed_at text, new_phone text
);

CREATE OR REPLACE FUNCTION rowgate.iso(t timestamptz) RETURNS text
  LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp
  AS $$ SELECT to_char(t AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') $$;

-- Whether an account's address is proved its user's: confirmed, and its email identity (if it
-- has one) says verified. An address taken without proof (autoconfirm, GoTrue's way too) is
-- confirmed with an unverified email identity.
CREATE OR REPLACE FUNCTION rowgate.email_proved(u auth.users) RETURNS boolean
  LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp
  AS $$ SELECT u.email_confirmed_at IS NOT NULL AND NOT EXISTS (
          SELECT 1 FROM auth.identities i WHERE i.user_id = u.id AND i.provider = 'email'
            AND i.identity_data ->> 'email_verified' IS DISTINCT FROM 'true') $$;

-- A UUID from text, or null for what is none: so that a lookup by a session's id compares uuids
-- and uses the table's index (comparing `id::text` reads every row).
CREATE OR REPLACE FUNCTION rowgate.uuid_or_null(p text) RETURNS uuid
  LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp
  AS $$ SELECT CASE WHEN p ~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN p::uuid END $$;

-- An account as the API answers it. Called in FROM (`FROM auth.users u, rowgate.account_of(u) a`)
-- or as one value: `(rowgate.account_of(u)).*` would run it once for each of its columns.
DROP FUNCTION IF EXISTS rowgate.account_of(auth.users, boolean, text);
CREATE OR REPLACE FUNCTION rowgate.account_of(u auth.users, p_hash boolean DEFAULT false, p_session text DEFAULT NULL)
  RETURNS rowgate.account
  LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp
  AS $$ SELECT ROW(u.id::text, u.email, u.phone, coalesce(nullif(u.role, ''), 'authenticated'),
                   rowgate.iso(u.created_at), rowgate.iso(coalesce(u.updated_at, u.created_at)),
                   rowgate.iso(u.email_confirmed_at), rowgate.iso(u.last_sign_in_at),
                   rowgate.iso(u.banned_until), coalesce(u.banned_until > now(), false),
                   coalesce(u.raw_app_meta_data, '{}')::text, coalesce(u.raw_user_meta_data, '{}')::text,
                   u.is_anonymous, CASE WHEN p_hash THEN u.encrypted_password END, p_session,
                   rowgate.iso(u.confirmation_sent_at), rowgate.iso(u.recovery_sent_at),
                   rowgate.iso(u.email_change_sent_at), nullif(u.email_change, ''),
                   (SELECT coalesce(json_agg(json_build_object('id', f.id, 'friendly_name', f.friendly_name,
                             'factor_type', f.factor_type, 'status', f.status, 'created_at', rowgate.iso(f.created_at),
                             'updated_at', rowgate.iso(f.updated_at)) ORDER BY f.created_at), '[]')::text
                    FROM auth.mfa_factors f WHERE f.user_id = u.id),
                   coalesce(s.aal::text, 'aal1'), extract(epoch FROM s.created_at)::bigint,
                   (SELECT coalesce(json_agg(json_build_object('identity_id', i.id, 'id', i.provider_id, 'user_id', i.user_id,
                             'identity_data', i.identity_data, 'provider', i.provider,
                             'last_sign_in_at', rowgate.iso(i.last_sign_in_at), 'created_at', rowgate.iso(i.created_at),
                             'updated_at', rowgate.iso(i.updated_at), 'email', i.email) ORDER BY i.created_at), '[]')::text
                    FROM auth.identities i WHERE i.user_id = u.id AND i.provider <> 'email'),
                   rowgate.iso(u.invited_at),
                   (SELECT c.authentication_method FROM auth.mfa_amr_claims c
                    WHERE c.session_id = rowgate.uuid_or_null(p_session) AND c.authentication_method NOT IN ('totp', 'mfa/webauthn')
                    ORDER BY c.created_at LIMIT 1),
                   rowgate.email_proved(u),
                   (SELECT c.authentication_method FROM auth.mfa_amr_claims c
                    WHERE c.session_id = rowgate.uuid_or_null(p_session) AND c.authentication_method IN ('totp', 'mfa/webauthn')
                    ORDER BY c.updated_at DESC LIMIT 1),
                   s.oauth_client_id::text, s.scopes,
                   rowgate.iso(u.phone_confirmed_at), nullif(u.phone_change, ''))::rowgate.account
        -- The session read once, by its key (none: a null row).
        FROM (SELECT 1) AS one LEFT JOIN auth.sessions s ON s.id = rowgate.uuid_or_null(p_session) $$;

-- A metadata object with `patch`'s keys set, those whose value is null removed (GoTrue's merge).
CREATE OR REPLACE FUNCTION rowgate.merged(current jsonb, patch jsonb) RETURNS jsonb
  LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp
  AS $$ SELECT (coalesce(current, '{}')
                || coalesce((SELECT jsonb_object_agg(key, value) FROM jsonb_each(patch) WHERE value <> 'null'), '{}'))
               - coalesce((SELECT array_agg(key) FROM jsonb_each(patch) WHERE value = 'null'), '{}') $$;

-- A new account (with its email identity) and, given p_token, its first session; no row when
-- the address or phone is taken.
DROP FUNCTION IF EXISTS rowgate.account_create(text, text, text, text, bigint);
DROP FUNCTION IF EXISTS rowgate.account_create(text, text, text, text, jsonb, jsonb, boolean, boolean, text, bigint, text, text, boolean);
CREATE OR REPLACE FUNCTION rowgate.account_create(
  p_id text, p_email text, p_phone text, p_hash text, p_user_meta jsonb, p_app_meta jsonb,
  p_anonymous boolean, p_confirmed boolean, p_role text, p_banned_until bigint,
  p_token text, p_session text, p_invited boolean, p_unproved boolean, p_phone_confirmed boolean)
  RETURNS SETOF rowgate.account
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
  AS $$
  DECLARE u auth.users;
  BEGIN
    INSERT INTO auth.users AS x (id, aud, role, email, phone, encrypted_password, email_confirmed_at,
                                 raw_app_meta_data, raw_user_meta_data, is_anonymous, banned_until,
                                 created_at, updated_at, last_sign_in_at, invited_at, phone_confirmed_at)
      VALUES (p_id::uuid, 'authenticated', p_role, p_email, p_phone, p_hash,
              CASE WHEN p_confirmed AND p_email IS NOT NULL THEN now() END,
              p_app_meta, p_user_meta, p_anonymous, to_timestamp(p_banned_until), now(), now(),
              CASE WHEN p_token IS NOT NULL THEN now() END, CASE WHEN p_invited THEN now() END,
              CASE WHEN p_phone_confirmed AND p_phone IS NOT NULL THEN now() END)
      ON CONFLICT DO NOTHING RETURNING * INTO u;
    IF NOT FOUND THEN RETURN; END IF;
    IF p_email IS NOT NULL THEN
      INSERT INTO auth.identities (id, provider_id, user_id, identity_data, provider, last_sign_in_at, created_at, updated_at)
        VALUES (u.id, p_id, u.id,
                jsonb_build_object('sub', p_id, 'email', p_email, 'email_verified', p_confirmed AND NOT p_unproved,
                                   'phone_verified', false),
                'email', u.last_sign_in_at, now(), now());
    END IF;
    IF p_token IS NOT NULL THEN
      INSERT INTO auth.sessions (id, user_id, created_at, updated_at, aal) VALUES (p_session::uuid, u.id, now(), now(), 'aal1');
      INSERT INTO auth.mfa_amr_claims (session_id, created_at, updated_at, authentication_method, id)
        VALUES (p_session::uuid, now(), now(), CASE WHEN p_anonymous THEN 'anonymous' ELSE 'password' END, gen_random_uuid());
      INSERT INTO auth.refresh_tokens (token, user_id, revoked, created_at, updated_at, session_id)
        VALUES (p_token, p_id, false, now(), now(), p_session::uuid);
    END IF;
    -- Read again: triggers on auth.users may have changed the row.
    RETURN QUERY SELECT a.* FROM auth.users x, rowgate.account_of(x, false, p_session) a WHERE x.id = u.id;
  END $$;

CREATE OR REPLACE FUNCTION rowgate.account_by_phone(p_phone text)
  RETURNS SETOF rowgate.account
  LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
  AS $$ SELECT a.* FROM auth.users u, rowgate.account_of(u, true) a WHERE u.phone = p_phone AND u.deleted_at IS NULL $$;

DROP FUNCTION IF EXISTS rowgate.account_by_email(text);
CREATE OR REPLACE FUNCTION rowgate.account_by_email(p_email text)
  RETURNS SETOF rowgate.account
  LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
  AS $$ SELECT a.* FROM auth.users u, rowgate.account_of(u, true) a
        WHERE u.email = lower(p_email) AND NOT u.is_sso_user AND u.deleted_at IS NULL $$;

DROP FUNCTION IF EXISTS rowgate.account_by_id(text);
CREATE OR REPLACE FUNCTION rowgate.account_by_id(p_id text)
  RETURNS SETOF rowgate.account
  LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
  AS $$ SELECT a.* FROM auth.users u, rowgate.account_of(u) a WHERE u.id = rowgate.uuid_or_null(p_id) AND u.deleted_at IS NULL $$;

-- A new session of a user who just proved who they are: its refresh token stored, the time of
-- the sign-in recorded on the user and its identity.
DROP FUNCTION IF EXISTS rowgate.account_store_refresh(text, text, bigint);
DROP FUNCTION IF EXISTS rowgate.account_sign_in(text, text, text);
-- A new session (held by the OAuth client p_client, with the scopes p_scopes, if given).
DROP FUNCTION IF EXISTS rowgate.account_sign_in(text, text, text, text);
CREATE OR REPLACE FUNCTION rowgate.account_sign_in(p_user text, p_token text, p_session text, p_method text,
    p_client text DEFAULT NULL, p_scopes text DEFAULT NULL)
  RETURNS SETOF rowgate.account
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
  AS $$
  BEGIN
    UPDATE auth.users SET last_sign_in_at = now() WHERE id = p_user::uuid AND deleted_at IS NULL;
    IF NOT FOUND THEN RETURN; END IF;
    UPDATE auth.identities SET last_sign_in_at = now() WHERE user_id = p_user::uuid AND provider = 'email';
    INSERT INTO auth.sessions (id, user_id, created_at, updated_at, aal, oauth_client_id, scopes)
      VALUES (p_session::uuid, p_user::uuid, now(), now(), 'aal1', p_client::uuid, p_scopes);
    INSERT INTO auth.mfa_amr_claims (session_id, created_at, updated_at, authentication_method, id)
      VALUES (p_session::uuid, now(), now(), p_method, gen_random_uuid());
    INSERT INTO auth.refresh_tokens (token, user_id, revoked, created_at, updated_at, session_id)
      VALUES (p_token, p_user, false, now(), now(), p_session::uuid);
    RETURN QUERY SELECT a.* FROM auth.users u, rowgate.account_of(u, false, p_session) a WHERE u.id = p_user::uuid;
  END $$;

-- Rotation in one step: the presented token (p_old, a hash) is used up and its successor
-- (p_new) stored. One used within the last p_reuse seconds (a retry, another tab) whose
-- successor is still live gets that successor again; one used otherwise revokes all of its
-- user's (it may have been stolen). A token lives p_lifetime seconds. Only the holder of its
-- session refreshes it: the OAuth client p_client, or (null) a client of no session's. No row:
-- refused.
CREATE OR REPLACE FUNCTION rowgate.account_rotate(p_old text, p_new text, p_now bigint, p_lifetime bigint,
    p_reuse bigint, p_client text)
  RETURNS SETOF rowgate.account
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
  AS $$
  DECLARE t auth.refresh_tokens;
  BEGIN
    SELECT * INTO t FROM auth.refresh_tokens r WHERE r.token = p_old FOR UPDATE;
    IF NOT FOUND THEN RETURN; END IF;
    IF (SELECT s.oauth_client_id::text FROM auth.sessions s WHERE s.id = t.session_id) IS DISTINCT FROM p_client THEN
      RETURN;
    END IF;
    IF t.revoked THEN
      IF NOT (p_now - extract(epoch FROM t.updated_at) < p_reuse
              AND EXISTS (SELECT 1 FROM auth.refresh_tokens c WHERE c.token = p_new AND NOT c.revoked)) THEN
        -- An application's replay ends its own session only: a third party's fault is not the
        -- user's other sessions' end.
        UPDATE auth.refresh_tokens r SET revoked = true, updated_at = to_timestamp(p_now)
          WHERE r.user_id = t.user_id AND NOT r.revoked AND (p_client IS NULL OR r.session_id = t.session_id);
        RETURN;
      END IF;
    ELSE
      UPDATE auth.refresh_tokens r SET revoked = true, updated_at = to_timestamp(p_now) WHERE r.id = t.id;
    END IF;
    IF extract(epoch FROM t.created_at) + p_lifetime <= p_now THEN RETURN; END IF;
    -- A reuse finds the successor (derived from the token by rowgate) stored already.
    INSERT INTO auth.refresh_tokens (token, user_id, revoked, created_at, updated_at, parent, session_id)
      VALUES (p_new, t.user_id, false, to_timestamp(p_now), to_timestamp(p_now), t.token, t.session_id)
      ON CONFLICT (token) DO NOTHING;
    RETURN QUERY SELECT a.* FROM auth.users u, rowgate.account_of(u, false, t.session_id::text) a
      WHERE u.id = rowgate.uuid_or_null(t.user_id) AND u.deleted_at IS NULL;
  END $$;

-- The previous release's signatures, kept for its instances still serving during a rolling
-- upgrade (they know no OAuth client, no confirmed phone).
CREATE OR REPLACE FUNCTION rowgate.account_rotate(p_old text, p_new text, p_now bigint, p_lifetime bigint,
    p_reuse bigint)
  RETURNS SETOF rowgate.account
  LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
  AS $$ SELECT * FROM rowgate.account_rotate(p_old, p_new, p_now, p_lifetime, p_reuse, NULL::text) $$;
CREATE OR REPLACE FUNCTION rowgate.account_create(
  p_id text, p_email text, p_phone text, p_hash text, p_user_meta jsonb, p_app_meta jsonb,
  p_anonymous boolean, p_confirmed boolean, p_role text, p_banned_until bigint,
  p_token text, p_session text, p_invited boolean, p_unproved boolean)
  RETURNS SETOF rowgate.account
  LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
  AS $$ SELECT * FROM rowgate.account_create(p_id, p_email, p_phone, p_hash, p_user_meta, p_app_meta, p_anonymous,
          p_confirmed, p_role, p_banned_until, p_token, p_session, p_invited, p_unproved, false) $$;

-- Changes to an account (a null parameter changes nothing; p_ban: whether p_banned_until is
-- set, null then lifting a ban). An address or phone another account has: 23505. A new address
-- is proved only if p_confirm says so and p_unproved does not; p_confirm alone proves the
-- address the account has.
DROP FUNCTION IF EXISTS rowgate.account_update(text, text, text, text, jsonb, jsonb, boolean, boolean, bigint, boolean, text);
CREATE OR REPLACE FUNCTION rowgate.account_update(
  p_id text, p_email text, p_phone text, p_hash text, p_user_meta jsonb, p_app_meta jsonb,
  p_confirm boolean, p_ban boolean, p_banned_until bigint, p_anonymous boolean, p_role text,
  p_unproved boolean)
  RETURNS SETOF rowgate.account
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
  AS $$
  DECLARE v_old text; v_proved boolean;
  BEGIN
    SELECT u.email INTO v_old FROM auth.users u WHERE u.id = rowgate.uuid_or_null(p_id) AND u.deleted_at IS NULL FOR UPDATE;
    IF NOT FOUND THEN RETURN; END IF;
    UPDATE auth.users u SET
      email = coalesce(p_email, u.email),
      phone = coalesce(p_phone, u.phone),
      encrypted_password = coalesce(p_hash, u.encrypted_password),
      raw_user_meta_data = CASE WHEN p_user_meta IS NULL THEN u.raw_user_meta_data ELSE rowgate.merged(u.raw_user_meta_data, p_user_meta) END,
      raw_app_meta_data = CASE WHEN p_app_meta IS NULL THEN u.raw_app_meta_data ELSE rowgate.merged(u.raw_app_meta_data, p_app_meta) END,
      email_confirmed_at = CASE WHEN p_confirm AND u.email_confirmed_at IS NULL THEN now() ELSE u.email_confirmed_at END,
      banned_until = CASE WHEN p_ban THEN to_timestamp(p_banned_until) ELSE u.banned_until END,
      is_anonymous = coalesce(p_anonymous, u.is_anonymous),
      role = coalesce(p_role, u.role),
      updated_at = now()
    WHERE u.id = rowgate.uuid_or_null(p_id);
    v_proved := coalesce(p_confirm, false) AND NOT coalesce(p_unproved, false);
    IF p_email IS NOT NULL AND p_email IS DISTINCT FROM v_old THEN
      INSERT INTO auth.identities AS i (id, provider_id, user_id, identity_data, provider, created_at, updated_at)
        VALUES (p_id::uuid, p_id, p_id::uuid, jsonb_build_object('sub', p_id, 'email', p_email,
                'email_verified', v_proved, 'phone_verified', false), 'email', now(), now())
        ON CONFLICT (provider_id, provider) DO UPDATE
        SET identity_data = i.identity_data || jsonb_build_object('email', p_email, 'email_verified', v_proved),
            updated_at = now();
    ELSIF v_proved THEN
      UPDATE auth.identities i SET identity_data = i.identity_data || '{"email_verified": true}', updated_at = now()
        WHERE i.user_id = rowgate.uuid_or_null(p_id) AND i.provider = 'email';
    END IF;
    RETURN QUERY SELECT a.* FROM auth.users u, rowgate.account_of(u) a WHERE u.id = rowgate.uuid_or_null(p_id);
  END $$;

-- A page of the accounts, newest first, and how many there are.
CREATE OR REPLACE FUNCTION rowgate.account_list(p_offset bigint, p_limit bigint)
  RETURNS SETOF rowgate.account
  LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
  AS $$ SELECT (p.a).* FROM (SELECT rowgate.account_of(u) AS a, u.created_at, u.id FROM auth.users u
                              WHERE u.deleted_at IS NULL
                              ORDER BY u.created_at DESC, u.id OFFSET p_offset LIMIT p_limit) p
        ORDER BY p.created_at DESC, p.id $$;

CREATE OR REPLACE FUNCTION rowgate.account_count()
  RETURNS bigint
  LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
  AS $$ SELECT count(*) FROM auth.users u WHERE u.deleted_at IS NULL $$;

-- An account gone, with its identities, sessions and tokens (and whatever references it with
-- ON DELETE CASCADE). Whether there was one.
-- What GoTrue keeps of a soft-deleted account's personal data: a hash of it with the
-- account's id (base64url, unpadded).
CREATE OR REPLACE FUNCTION rowgate.obfuscated(p_id uuid, p_value text) RETURNS text
  LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp
  AS $$ SELECT translate(encode(sha256(convert_to(p_id::text || p_value, 'UTF8')), 'base64'), '+/=', '-_') $$;

-- An account deleted (with p_soft, as GoTrue's soft delete: the row stays for what references
-- it, its personal data replaced by hashes or wiped, what signs it in deleted).
DROP FUNCTION IF EXISTS rowgate.account_delete(text);
CREATE OR REPLACE FUNCTION rowgate.account_delete(p_id text, p_soft boolean)
  RETURNS boolean
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
  AS $$
  DECLARE v_user uuid;
  BEGIN
    IF NOT p_soft THEN
      DELETE FROM auth.refresh_tokens WHERE user_id = p_id;
      DELETE FROM auth.users WHERE id = rowgate.uuid_or_null(p_id);
      RETURN FOUND;
    END IF;
    UPDATE auth.users u SET
        email = CASE WHEN u.email IS NOT NULL THEN rowgate.obfuscated(u.id, u.email) END,
        phone = CASE WHEN u.phone IS NOT NULL THEN left(rowgate.obfuscated(u.id, u.phone), 15) END,
        email_change = CASE WHEN coalesce(u.email_change, '') <> '' THEN rowgate.obfuscated(u.id, u.email_change) ELSE '' END,
        encrypted_password = NULL, confirmation_token = '', recovery_token = '',
        email_change_token_current = '', email_change_token_new = '', reauthentication_token = '',
        raw_user_meta_data = '{}', raw_app_meta_data = '{}',
        deleted_at = coalesce(u.deleted_at, now()), updated_at = now()
      WHERE u.id = rowgate.uuid_or_null(p_id) AND u.deleted_at IS NULL
      RETURNING u.id INTO v_user;
    IF v_user IS NULL THEN
      RETURN EXISTS (SELECT 1 FROM auth.users WHERE id = rowgate.uuid_or_null(p_id));
    END IF;
    UPDATE auth.identities i SET identity_data = '{}', updated_at = now(),
        provider_id = rowgate.obfuscated(i.user_id, i.provider || ':' || i.provider_id)
      WHERE i.user_id = v_user;
    DELETE FROM auth.mfa_factors WHERE user_id = v_user;
    IF to_regclass('auth.webauthn_credentials') IS NOT NULL THEN
      DELETE FROM auth.webauthn_credentials WHERE user_id = v_user;
    END IF;
    DELETE FROM auth.flow_state WHERE user_id = v_user;
    DELETE FROM auth.sessions WHERE user_id = v_user;
    DELETE FROM auth.refresh_tokens WHERE user_id = p_id;
    RETURN true;
  END $$;

-- A code sent by mail (its hash) stored for a user, unless one of its kind went out less than
-- p_interval seconds ago: 0, or the seconds to wait; -1 for no such user.
CREATE OR REPLACE FUNCTION rowgate.account_issue(p_user text, p_kind text, p_hash text, p_new_email text, p_interval bigint)
  RETURNS bigint
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
  AS $$
  DECLARE u auth.users; last timestamptz;
  BEGIN
    SELECT * INTO u FROM auth.users x WHERE x.id = rowgate.uuid_or_null(p_user) AND x.deleted_at IS NULL FOR UPDATE;
    IF NOT FOUND THEN RETURN -1; END IF;
    last := CASE p_kind WHEN 'confirmation' THEN u.confirmation_sent_at WHEN 'recovery' THEN u.recovery_sent_at
                        WHEN 'email_change' THEN u.email_change_sent_at WHEN 'email_change_current' THEN u.email_change_sent_at
                        WHEN 'reauthentication' THEN u.reauthentication_sent_at
                        WHEN 'phone_confirmation' THEN u.confirmation_sent_at WHEN 'phone_change' THEN u.phone_change_sent_at END;
    IF last > now() - make_interval(secs => p_interval) THEN
      RETURN greatest(1, ceil(extract(epoch FROM last + make_interval(secs => p_interval) - now())))::bigint;
    END IF;
    IF p_kind = 'confirmation' THEN
      UPDATE auth.users SET confirmation_token = p_hash, confirmation_sent_at = now() WHERE id = u.id;
    ELSIF p_kind = 'recovery' THEN
      UPDATE auth.users SET recovery_token = p_hash, recovery_sent_at = now() WHERE id = u.id;
    ELSIF p_kind = 'email_change' THEN
      UPDATE auth.users SET email_change_token_new = p_hash, email_change_token_current = '', email_change = p_new_email,
        email_change_sent_at = now(), email_change_confirm_status = 0 WHERE id = u.id;
    ELSIF p_kind = 'email_change_current' THEN
      UPDATE auth.users SET email_change_token_current = p_hash WHERE id = u.id;
    ELSIF p_kind = 'reauthentication' THEN
      UPDATE auth.users SET reauthentication_token = p_hash, reauthentication_sent_at = now() WHERE id = u.id;
    ELSIF p_kind = 'phone_confirmation' THEN
      -- Marked, so that no address's confirmation redeems it (the column is shared, as GoTrue's).
      UPDATE auth.users SET confirmation_token = 'sms_' || p_hash, confirmation_sent_at = now() WHERE id = u.id;
    ELSIF p_kind = 'phone_change' THEN
      UPDATE auth.users SET phone_change_token = p_hash, phone_change = p_new_email, phone_change_sent_at = now()
        WHERE id = u.id;
    ELSE
      RAISE EXCEPTION 'unknown code kind %', p_kind;
    END IF;
    RETURN 0;
  END $$;

-- Redeems a code (its hash) of kind p_kind ('confirmation', 'recovery', 'email_change', or
-- null for a confirmation or recovery code alike) sent less than p_expiry seconds ago, for the
-- address p_email if given: used up, the address confirmed (an email change: the new address
-- taken). The user, or no row.
CREATE OR REPLACE FUNCTION rowgate.account_redeem(p_kind text, p_hash text, p_email text, p_expiry bigint)
  RETURNS SETOF rowgate.account
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
  AS $$
  DECLARE v_user uuid; fresh timestamptz := now() - make_interval(secs => p_expiry);
  BEGIN
    IF p_hash IS NULL OR p_hash = '' THEN RETURN; END IF;
    -- Each token's comparison carries its index's predicate (GoTrue's partial indexes), which a
    -- hash always meets: without it the planner cannot use the index and reads every user.
    IF p_kind = 'phone_change' THEN
      -- A code by SMS to a new number: the number taken.
      UPDATE auth.users u SET phone = u.phone_change, phone_change = '', phone_change_token = '',
          phone_confirmed_at = now(), is_anonymous = false, updated_at = now()
        WHERE u.phone_change_token = p_hash AND u.phone_change_token !~ '^[0-9 ]*$'
          AND u.deleted_at IS NULL AND u.phone_change_sent_at > fresh AND u.phone_change = p_email
        RETURNING u.id INTO v_user;
    ELSIF p_kind = 'phone_confirmation' THEN
      -- A code by SMS: the number confirmed.
      UPDATE auth.users u SET confirmation_token = '', phone_confirmed_at = coalesce(u.phone_confirmed_at, now()),
          is_anonymous = false, updated_at = now()
        WHERE u.confirmation_token = 'sms_' || p_hash AND u.confirmation_token !~ '^[0-9 ]*$'
          AND u.deleted_at IS NULL AND u.confirmation_sent_at > fresh AND u.phone = p_email
        RETURNING u.id INTO v_user;
    END IF;
    IF p_kind IN ('phone_confirmation', 'phone_change') THEN
      RETURN QUERY SELECT a.* FROM auth.users u, rowgate.account_of(u) a WHERE u.id = v_user;
      RETURN;
    END IF;
    IF coalesce(p_kind, 'confirmation') = 'confirmation' THEN
      UPDATE auth.users u SET confirmation_token = '', email_confirmed_at = coalesce(u.email_confirmed_at, now()), updated_at = now()
        WHERE u.confirmation_token IN (p_hash, 'pkce_' || p_hash) AND u.confirmation_token !~ '^[0-9 ]*$'
          AND u.confirmation_token NOT LIKE 'sms\_%'
          AND u.confirmation_sent_at > fresh AND (p_email IS NULL OR u.email = lower(p_email))
        RETURNING u.id INTO v_user;
    END IF;
    IF v_user IS NULL AND coalesce(p_kind, 'recovery') = 'recovery' THEN
      UPDATE auth.users u SET recovery_token = '', email_confirmed_at = coalesce(u.email_confirmed_at, now()), updated_at = now()
        WHERE u.recovery_token IN (p_hash, 'pkce_' || p_hash) AND u.recovery_token !~ '^[0-9 ]*$' AND u.recovery_sent_at > fresh AND (p_email IS NULL OR u.email = lower(p_email))
        RETURNING u.id INTO v_user;
    END IF;
    IF v_user IS NULL AND p_kind = 'email_change' THEN
      -- A secure change mails a code to each address: the first accepted waits for the other.
      UPDATE auth.users u SET
          email_change_token_new = CASE WHEN u.email_change_token_new IN (p_hash, 'pkce_' || p_hash) THEN '' ELSE u.email_change_token_new END,
          email_change_token_current = CASE WHEN u.email_change_token_current IN (p_hash, 'pkce_' || p_hash) THEN '' ELSE u.email_change_token_current END,
          email_change_confirm_status = 1, updated_at = now()
        WHERE ((u.email_change_token_new IN (p_hash, 'pkce_' || p_hash) AND u.email_change_token_new !~ '^[0-9 ]*$'
                AND coalesce(u.email_change_token_current, '') <> '')
            OR (u.email_change_token_current IN (p_hash, 'pkce_' || p_hash) AND u.email_change_token_current !~ '^[0-9 ]*$'
                AND coalesce(u.email_change_token_new, '') <> ''))
          AND u.email_change_sent_at > fresh AND coalesce(u.email_change, '') <> ''
          AND (p_email IS NULL OR u.email_change = lower(p_email) OR u.email = lower(p_email))
        RETURNING u.id INTO v_user;
      IF v_user IS NOT NULL THEN
        RETURN QUERY SELECT a.* FROM auth.users u, rowgate.account_of(u) a WHERE u.id = v_user;
        RETURN;
      END IF;
      UPDATE auth.users u SET email = u.email_change, email_change = '', email_change_token_new = '',
        email_change_token_current = '',
        email_confirmed_at = now(), email_change_confirm_status = 0, updated_at = now(), is_anonymous = false,
        raw_app_meta_data = CASE WHEN u.is_anonymous
          THEN coalesce(u.raw_app_meta_data, '{}') || '{"provider": "email", "providers": ["email"]}' ELSE u.raw_app_meta_data END
        WHERE ((u.email_change_token_new IN (p_hash, 'pkce_' || p_hash) AND u.email_change_token_new !~ '^[0-9 ]*$')
            OR (u.email_change_token_current IN (p_hash, 'pkce_' || p_hash) AND u.email_change_token_current !~ '^[0-9 ]*$'))
          AND u.email_change_sent_at > fresh AND coalesce(u.email_change, '') <> ''
          AND (p_email IS NULL OR u.email_change = lower(p_email) OR u.email = lower(p_email))
        RETURNING u.id INTO v_user;
    END IF;
    IF v_user IS NULL AND p_kind = 'reauthentication' THEN
      UPDATE auth.users u SET reauthentication_token = '', updated_at = now()
        WHERE u.reauthentication_token = p_hash AND u.reauthentication_token !~ '^[0-9 ]*$' AND u.reauthentication_sent_at > fresh
          AND (p_email IS NULL OR u.email = lower(p_email))
        RETURNING u.id INTO v_user;
      IF v_user IS NOT NULL THEN
        RETURN QUERY SELECT a.* FROM auth.users u, rowgate.account_of(u) a WHERE u.id = v_user;
      END IF;
      RETURN;
    END IF;
    IF v_user IS NULL THEN RETURN; END IF;
    UPDATE auth.identities i SET identity_data = i.identity_data
        || jsonb_build_object('email', (SELECT email FROM auth.users WHERE auth.users.id = i.user_id), 'email_verified', true),
        updated_at = now()
      WHERE i.user_id = v_user AND i.provider = 'email';
    INSERT INTO auth.identities (id, provider_id, user_id, identity_data, provider, created_at, updated_at)
      SELECT u.id, u.id::text, u.id, jsonb_build_object('sub', u.id::text, 'email', u.email, 'email_verified', true,
             'phone_verified', false), 'email', now(), now()
      FROM auth.users u WHERE u.id = v_user AND u.email IS NOT NULL
      ON CONFLICT (provider_id, provider) DO NOTHING;
    RETURN QUERY SELECT a.* FROM auth.users u, rowgate.account_of(u) a WHERE u.id = v_user;
  END $$;

-- A TOTP factor enrolled, unverified: 'ok', 'name_taken', 'too_many' (ten is the most) or
-- 'needs_aal2' (the user has a verified factor the session has not used). Unverified factors
-- older than p_expiry seconds go first.
DROP FUNCTION IF EXISTS rowgate.account_factor_enroll(text, text, text, text, boolean, bigint);
CREATE OR REPLACE FUNCTION rowgate.account_factor_enroll(p_user text, p_id text, p_name text, p_type text, p_secret text,
                                                         p_aal2 boolean, p_expiry bigint)
  RETURNS text
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
  AS $$
  BEGIN
    PERFORM 1 FROM auth.users WHERE id = rowgate.uuid_or_null(p_user) FOR UPDATE;
    DELETE FROM auth.mfa_factors WHERE user_id = rowgate.uuid_or_null(p_user) AND status = 'unverified'
      AND created_at < now() - make_interval(secs => p_expiry);
    IF EXISTS (SELECT 1 FROM auth.mfa_factors WHERE user_id = rowgate.uuid_or_null(p_user) AND friendly_name = p_name) THEN
      RETURN 'name_taken';
    END IF;
    IF (SELECT count(*) FROM auth.mfa_factors WHERE user_id = rowgate.uuid_or_null(p_user)) >= 10 THEN RETURN 'too_many'; END IF;
    IF NOT p_aal2 AND EXISTS (SELECT 1 FROM auth.mfa_factors WHERE user_id = rowgate.uuid_or_null(p_user) AND status = 'verified') THEN
      RETURN 'needs_aal2';
    END IF;
    INSERT INTO auth.mfa_factors (id, user_id, friendly_name, factor_type, status, created_at, updated_at, secret)
      VALUES (p_id::uuid, p_user::uuid, p_name, p_type::auth.factor_type, 'unverified', now(), now(), p_secret);
    RETURN 'ok';
  END $$;

DROP FUNCTION IF EXISTS rowgate.account_factor_challenge(text, text, text);
CREATE OR REPLACE FUNCTION rowgate.account_factor_challenge(p_user text, p_factor text, p_challenge text, p_ceremony text)
  RETURNS boolean
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
  AS $$
  BEGIN
    UPDATE auth.mfa_factors SET last_challenged_at = now() WHERE id = rowgate.uuid_or_null(p_factor) AND user_id = rowgate.uuid_or_null(p_user);
    IF NOT FOUND THEN RETURN false; END IF;
    INSERT INTO auth.mfa_challenges (id, factor_id, created_at, web_authn_session_data)
      VALUES (p_challenge::uuid, p_factor::uuid, now(), to_jsonb(p_ceremony));
    RETURN true;
  END $$;

-- The factor (its type, secret or WebAuthn credential, whether it is verified) and when the
-- challenge was made and what its ceremony keeps (null if it is none of the factor's, or was
-- answered); the user's other WebAuthn credentials, a JSON array (null for none).
DROP FUNCTION IF EXISTS rowgate.account_factor_challenged(text, text, text);
CREATE OR REPLACE FUNCTION rowgate.account_factor_challenged(p_user text, p_factor text, p_challenge text)
  RETURNS TABLE (factor_type text, secret text, credential text, verified boolean, challenged_at bigint, ceremony text,
                 others text)
  LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
  AS $$ SELECT f.factor_type::text, f.secret, f.web_authn_credential::text, f.status = 'verified',
               extract(epoch FROM c.created_at)::bigint, c.web_authn_session_data #>> '{}',
               (SELECT json_agg(o.web_authn_credential)::text FROM auth.mfa_factors o
                WHERE o.user_id = f.user_id AND o.id <> f.id AND o.web_authn_credential IS NOT NULL)
        FROM auth.mfa_factors f
        LEFT JOIN auth.mfa_challenges c ON c.id = rowgate.uuid_or_null(p_challenge) AND c.factor_id = f.id AND c.verified_at IS NULL
        WHERE f.id = rowgate.uuid_or_null(p_factor) AND f.user_id = rowgate.uuid_or_null(p_user) $$;

-- A challenge answered: used up, the factor verified, the session at aal2 with the method
-- recorded, and a new refresh token in it.
DROP FUNCTION IF EXISTS rowgate.account_factor_verify(text, text, text, text, text);
CREATE OR REPLACE FUNCTION rowgate.account_factor_verify(p_user text, p_factor text, p_challenge text, p_session text,
                                                         p_token text, p_credential text)
  RETURNS SETOF rowgate.account
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
  AS $$
  DECLARE v_method text;
  BEGIN
    UPDATE auth.mfa_challenges c SET verified_at = now()
      WHERE c.id = rowgate.uuid_or_null(p_challenge) AND c.factor_id = rowgate.uuid_or_null(p_factor) AND c.verified_at IS NULL
        AND EXISTS (SELECT 1 FROM auth.mfa_factors f WHERE f.id = c.factor_id AND f.user_id = rowgate.uuid_or_null(p_user));
    IF NOT FOUND THEN RETURN; END IF;
    UPDATE auth.mfa_factors SET status = 'verified', updated_at = now(),
        web_authn_credential = coalesce(p_credential::jsonb, web_authn_credential)
      WHERE id = rowgate.uuid_or_null(p_factor)
      RETURNING CASE factor_type WHEN 'webauthn' THEN 'mfa/webauthn' ELSE 'totp' END INTO v_method;
    UPDATE auth.sessions SET aal = 'aal2', factor_id = p_factor::uuid, updated_at = now()
      WHERE id = rowgate.uuid_or_null(p_session) AND user_id = rowgate.uuid_or_null(p_user);
    IF NOT FOUND THEN RETURN; END IF;
    INSERT INTO auth.mfa_amr_claims (session_id, created_at, updated_at, authentication_method, id)
      VALUES (p_session::uuid, now(), now(), v_method, gen_random_uuid())
      ON CONFLICT (session_id, authentication_method) DO UPDATE SET updated_at = now();
    INSERT INTO auth.refresh_tokens (token, user_id, revoked, created_at, updated_at, session_id)
      VALUES (p_token, p_user, false, now(), now(), p_session::uuid);
    RETURN QUERY SELECT a.* FROM auth.users u, rowgate.account_of(u, false, p_session) a WHERE u.id = rowgate.uuid_or_null(p_user);
  END $$;

-- A factor removed: 'ok', 'not_found', or 'needs_aal2' for a verified one from an aal1 session;
-- the sessions that used it go back to aal1.
CREATE OR REPLACE FUNCTION rowgate.account_factor_unenroll(p_user text, p_factor text, p_aal2 boolean)
  RETURNS text
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
  AS $$
  DECLARE f auth.mfa_factors;
  BEGIN
    SELECT * INTO f FROM auth.mfa_factors x WHERE x.id = rowgate.uuid_or_null(p_factor) AND x.user_id = rowgate.uuid_or_null(p_user);
    IF NOT FOUND THEN RETURN 'not_found'; END IF;
    IF f.status = 'verified' AND NOT p_aal2 THEN RETURN 'needs_aal2'; END IF;
    UPDATE auth.sessions SET aal = 'aal1', factor_id = NULL, updated_at = now() WHERE factor_id = f.id;
    DELETE FROM auth.mfa_factors WHERE id = f.id;
    RETURN 'ok';
  END $$;

-- PKCE flows: kept when a mail goes out, handed their code when its link comes back (flows
-- older than a day go meanwhile), taken once when the code is exchanged.
CREATE OR REPLACE FUNCTION rowgate.account_flow_start(p_id text, p_user text, p_code text, p_challenge text, p_method text, p_auth_method text)
  RETURNS void
  LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
  AS $$
    DELETE FROM auth.flow_state WHERE created_at < now() - interval '1 day';
    INSERT INTO auth.flow_state (id, user_id, auth_code, code_challenge_method, code_challenge, provider_type,
                                 created_at, updated_at, authentication_method)
      VALUES (p_id::uuid, p_user::uuid, p_code, p_method::auth.code_challenge_method, p_challenge, 'email', now(), now(), p_auth_method)
  $$;

CREATE OR REPLACE FUNCTION rowgate.account_flow_code(p_user text, p_auth_method text)
  RETURNS text
  LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
  AS $$
    UPDATE auth.flow_state f SET auth_code_issued_at = now(), updated_at = now()
      WHERE f.id = (SELECT x.id FROM auth.flow_state x WHERE x.user_id = rowgate.uuid_or_null(p_user)
                      AND x.authentication_method = p_auth_method ORDER BY x.created_at DESC LIMIT 1)
      RETURNING f.auth_code
  $$;

DROP FUNCTION IF EXISTS rowgate.account_flow_take(text);
CREATE OR REPLACE FUNCTION rowgate.account_flow_take(p_code text)
  RETURNS TABLE (user_id text, challenge text, method text, issued_at bigint, authentication_method text)
  LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
  AS $$
    DELETE FROM auth.flow_state f WHERE f.auth_code = p_code AND f.user_id IS NOT NULL
      RETURNING f.user_id::text, f.code_challenge, f.code_challenge_method::text,
                extract(epoch FROM f.auth_code_issued_at)::bigint, f.authentication_method
  $$;

-- The providers of an account's app_metadata with p_provider among them, and as its provider
-- if it had none.
CREATE OR REPLACE FUNCTION rowgate.with_provider(app jsonb, p_provider text) RETURNS jsonb
  LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp
  AS $$ SELECT coalesce(app, '{}')
        || jsonb_build_object('provider', coalesce(app ->> 'provider', p_provider),
                              'providers', CASE WHEN coalesce(app -> 'providers', '[]') ? p_provider
                                                THEN app -> 'providers'
                                                ELSE coalesce(app -> 'providers', '[]') || to_jsonb(p_provider) END) $$;

-- An identity added to a signed-in user's account (GoTrue's manual linking): `attached` is done,
-- theirs (it was already), others (another account has it) or no_user. An account without an
-- address takes the identity's verified one, unless another account has it, and stops being
-- anonymous.
CREATE OR REPLACE FUNCTION rowgate.account_attach_identity(
  p_user text, p_provider text, p_subject text, p_email text, p_verified boolean, p_data jsonb)
  RETURNS TABLE (account rowgate.account, attached text)
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
  AS $$
  DECLARE v_owner uuid; v_email text;
  BEGIN
    SELECT i.user_id INTO v_owner FROM auth.identities i WHERE i.provider = p_provider AND i.provider_id = p_subject;
    IF FOUND THEN
      RETURN QUERY SELECT NULL::rowgate.account, CASE WHEN v_owner::text = p_user THEN 'theirs' ELSE 'others' END;
      RETURN;
    END IF;
    SELECT u.email INTO v_email FROM auth.users u WHERE u.id = rowgate.uuid_or_null(p_user) FOR UPDATE;
    IF NOT FOUND THEN
      RETURN QUERY SELECT NULL::rowgate.account, 'no_user'::text;
      RETURN;
    END IF;
    INSERT INTO auth.identities (id, provider_id, user_id, identity_data, provider, last_sign_in_at, created_at, updated_at)
      VALUES (gen_random_uuid(), p_subject, p_user::uuid, p_data, p_provider, now(), now(), now());
    IF v_email IS NULL AND p_verified AND p_email IS NOT NULL
       AND NOT EXISTS (SELECT 1 FROM auth.users x WHERE x.email = p_email) THEN
      UPDATE auth.users SET email = p_email, email_confirmed_at = now(), is_anonymous = false WHERE id = rowgate.uuid_or_null(p_user);
    END IF;
    UPDATE auth.users u SET raw_app_meta_data = rowgate.with_provider(u.raw_app_meta_data, p_provider), updated_at = now()
      WHERE u.id = rowgate.uuid_or_null(p_user);
    RETURN QUERY SELECT rowgate.account_of(u), 'done'::text FROM auth.users u WHERE u.id = rowgate.uuid_or_null(p_user);
  END $$;

-- An identity at a provider removed from an account (never the address's own), and the provider
-- from its providers unless another of its identities is there; no row if it had no such identity.
CREATE OR REPLACE FUNCTION rowgate.account_detach_identity(p_user text, p_identity text)
  RETURNS SETOF rowgate.account
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
  AS $$
  DECLARE v_provider text; v_left jsonb;
  BEGIN
    DELETE FROM auth.identities i WHERE i.id = rowgate.uuid_or_null(p_identity) AND i.user_id = rowgate.uuid_or_null(p_user) AND i.provider <> 'email'
      RETURNING i.provider INTO v_provider;
    IF NOT FOUND THEN RETURN; END IF;
    IF NOT EXISTS (SELECT 1 FROM auth.identities i WHERE i.user_id = rowgate.uuid_or_null(p_user) AND i.provider = v_provider) THEN
      UPDATE auth.users u SET updated_at = now(),
          raw_app_meta_data = coalesce(u.raw_app_meta_data, '{}')
            || jsonb_build_object('providers', coalesce(u.raw_app_meta_data -> 'providers', '[]') - v_provider)
        WHERE u.id = rowgate.uuid_or_null(p_user)
        RETURNING raw_app_meta_data -> 'providers' INTO v_left;
      UPDATE auth.users u SET raw_app_meta_data = CASE
          WHEN jsonb_array_length(coalesce(v_left, '[]')) = 0 THEN u.raw_app_meta_data - 'provider'
          ELSE u.raw_app_meta_data || jsonb_build_object('provider', v_left -> 0) END
        WHERE u.id = rowgate.uuid_or_null(p_user) AND u.raw_app_meta_data ->> 'provider' = v_provider;
    END IF;
    RETURN QUERY SELECT a.* FROM auth.users u, rowgate.account_of(u) a WHERE u.id = rowgate.uuid_or_null(p_user);
  END $$;

-- Whose an identity at an OpenID provider is, as GoTrue links them: the account that has it
-- (its data refreshed), else the one with its address if the provider verified it, else with
-- p_create a new account (without the address if another has it). An account whose address was
-- never proved (unconfirmed, or taken by autoconfirm) loses its password when a provider's
-- verified address links to it: whoever set that password did not prove the address. `linked`: existing, added, created or
-- would_create (then no account).
CREATE OR REPLACE FUNCTION rowgate.account_link_identity(
  p_provider text, p_subject text, p_email text, p_verified boolean, p_data jsonb,
  p_id text, p_user_meta jsonb, p_app_meta jsonb, p_confirmed boolean, p_create boolean)
  RETURNS TABLE (account rowgate.account, linked text)
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
  AS $$
  DECLARE v_user uuid; v_confirmed boolean; v_linked text;
  BEGIN
    UPDATE auth.identities SET identity_data = p_data, last_sign_in_at = now(), updated_at = now()
      WHERE provider = p_provider AND provider_id = p_subject RETURNING user_id INTO v_user;
    IF FOUND THEN
      v_linked := 'existing';
    ELSIF p_verified AND p_email IS NOT NULL THEN
      SELECT u.id, rowgate.email_proved(u) INTO v_user, v_confirmed FROM auth.users u
        WHERE u.email = p_email AND NOT u.is_sso_user AND NOT u.is_anonymous AND u.deleted_at IS NULL;
      IF FOUND THEN
        v_linked := 'added';
        INSERT INTO auth.identities (id, provider_id, user_id, identity_data, provider, last_sign_in_at, created_at, updated_at)
          VALUES (gen_random_uuid(), p_subject, v_user, p_data, p_provider, now(), now(), now());
        IF NOT v_confirmed THEN
          UPDATE auth.users SET encrypted_password = NULL, email_confirmed_at = coalesce(email_confirmed_at, now())
            WHERE id = v_user;
          UPDATE auth.identities i SET identity_data = i.identity_data || '{"email_verified": true}', updated_at = now()
            WHERE i.user_id = v_user AND i.provider = 'email';
        END IF;
      END IF;
    END IF;
    IF v_linked IS NULL THEN
      IF NOT p_create THEN
        RETURN QUERY SELECT NULL::rowgate.account, 'would_create'::text;
        RETURN;
      END IF;
      INSERT INTO auth.users (id, aud, role, email, email_confirmed_at, raw_app_meta_data, raw_user_meta_data,
                              is_anonymous, created_at, updated_at, last_sign_in_at)
        VALUES (p_id::uuid, 'authenticated', 'authenticated', p_email, CASE WHEN p_confirmed THEN now() END,
                p_app_meta, p_user_meta, false, now(), now(), now())
        ON CONFLICT DO NOTHING RETURNING id INTO v_user;
      IF NOT FOUND THEN
        INSERT INTO auth.users (id, aud, role, raw_app_meta_data, raw_user_meta_data, is_anonymous,
                                created_at, updated_at, last_sign_in_at)
          VALUES (p_id::uuid, 'authenticated', 'authenticated', p_app_meta, p_user_meta, false, now(), now(), now())
          RETURNING id INTO v_user;
      END IF;
      INSERT INTO auth.identities (id, provider_id, user_id, identity_data, provider, last_sign_in_at, created_at, updated_at)
        VALUES (gen_random_uuid(), p_subject, v_user, p_data, p_provider, now(), now(), now());
      v_linked := 'created';
    ELSE
      UPDATE auth.users u SET updated_at = now(),
          raw_user_meta_data = rowgate.merged(u.raw_user_meta_data, p_data),
          raw_app_meta_data = rowgate.with_provider(u.raw_app_meta_data, p_provider)
        WHERE u.id = v_user;
    END IF;
    -- Read again: triggers on auth.users may have changed the row.
    RETURN QUERY SELECT rowgate.account_of(u), v_linked FROM auth.users u WHERE u.id = v_user;
  END $$;

-- Signing out: every session of the user (global), the one named (local), or every other one
-- (others), deleted with their tokens as GoTrue does (a token of an ended session is refused
-- as unknown, not taken for a stolen one). A token of no session (made before sessions were
-- kept) is in every scope but local.
DROP FUNCTION IF EXISTS rowgate.account_logout(text);
CREATE OR REPLACE FUNCTION rowgate.account_logout(p_user text, p_session text, p_scope text)
  RETURNS void
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
  AS $$
  BEGIN
    IF p_scope = 'local' AND p_session IS NOT NULL THEN
      DELETE FROM auth.sessions WHERE id = rowgate.uuid_or_null(p_session) AND user_id = rowgate.uuid_or_null(p_user);
      RETURN;
    END IF;
    DELETE FROM auth.sessions WHERE user_id = rowgate.uuid_or_null(p_user)
      AND (p_scope <> 'others' OR p_session IS NULL OR id::text <> p_session);
    DELETE FROM auth.refresh_tokens WHERE user_id = p_user AND session_id IS NULL;
  END $$;

-- Who may call the functions above is set by the install (accounts_install.rs): its list of
-- them is revoked from PUBLIC and granted to the serving role only.

-- An account's sessions, for the dashboard's administrators: newest first.
CREATE OR REPLACE FUNCTION rowgate.account_sessions(p_user text)
RETURNS TABLE (id text, signed_in_at timestamptz, method text, aal text, client_id text)
  LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT s.id::text, s.created_at,
         (SELECT c.authentication_method FROM auth.mfa_amr_claims c
          WHERE c.session_id = s.id ORDER BY c.created_at LIMIT 1),
         s.aal::text, s.oauth_client_id::text
  FROM auth.sessions s
  WHERE s.user_id = rowgate.uuid_or_null(p_user)
  ORDER BY s.created_at DESC, s.id
$$;
