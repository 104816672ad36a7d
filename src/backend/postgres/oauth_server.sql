-- Supabase Auth as an OAuth 2.1 server (rowgate accounts install, after accounts.sql): GoTrue's
-- auth.oauth_clients, with its column types and its way of keeping lists (comma-joined), so
-- clients GoTrue registered keep working; and the functions the serving role calls on it.

DO $$ BEGIN
  CREATE TYPE auth.oauth_registration_type AS ENUM ('dynamic', 'manual');
EXCEPTION WHEN duplicate_object THEN NULL; END $$;
DO $$ BEGIN
  CREATE TYPE auth.oauth_client_type AS ENUM ('public', 'confidential');
EXCEPTION WHEN duplicate_object THEN NULL; END $$;

CREATE TABLE IF NOT EXISTS auth.oauth_clients (
  id uuid NOT NULL PRIMARY KEY,
  client_secret_hash text,
  registration_type auth.oauth_registration_type NOT NULL,
  redirect_uris text NOT NULL,
  grant_types text NOT NULL,
  client_name text CHECK (char_length(client_name) <= 1024),
  client_uri text CHECK (char_length(client_uri) <= 2048),
  logo_uri text CHECK (char_length(logo_uri) <= 2048),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  deleted_at timestamptz,
  client_type auth.oauth_client_type NOT NULL DEFAULT 'confidential'
);
ALTER TABLE auth.oauth_clients ADD COLUMN IF NOT EXISTS token_endpoint_auth_method text
  CHECK (token_endpoint_auth_method IN ('client_secret_basic', 'client_secret_post', 'none'));
UPDATE auth.oauth_clients
  SET token_endpoint_auth_method = CASE WHEN client_type = 'public' THEN 'none' ELSE 'client_secret_basic' END
  WHERE token_endpoint_auth_method IS NULL;
ALTER TABLE auth.oauth_clients ALTER COLUMN token_endpoint_auth_method SET NOT NULL;
CREATE INDEX IF NOT EXISTS oauth_clients_deleted_at_idx ON auth.oauth_clients (deleted_at);

-- A client as the functions below answer it.
DROP TYPE IF EXISTS rowgate.oauth_client CASCADE;
CREATE TYPE rowgate.oauth_client AS (
  id text, registration_type text, client_type text, token_endpoint_auth_method text, secret_hash text,
  redirect_uris text, grant_types text, client_name text, client_uri text, logo_uri text,
  created_at text, updated_at text
);

CREATE OR REPLACE FUNCTION rowgate.oauth_client_of(c auth.oauth_clients) RETURNS rowgate.oauth_client
  LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp
  AS $$ SELECT ROW(c.id::text, c.registration_type::text, c.client_type::text, c.token_endpoint_auth_method,
                   c.client_secret_hash, c.redirect_uris, c.grant_types, c.client_name, c.client_uri, c.logo_uri,
                   rowgate.iso(c.created_at), rowgate.iso(c.updated_at))::rowgate.oauth_client $$;

CREATE OR REPLACE FUNCTION rowgate.oauth_client_add(p_id text, p_registration text, p_type text, p_method text,
    p_secret_hash text, p_redirect_uris text, p_grant_types text, p_name text, p_uri text, p_logo text)
  RETURNS SETOF rowgate.oauth_client
  LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
  AS $$ INSERT INTO auth.oauth_clients AS c (id, registration_type, client_type, token_endpoint_auth_method,
          client_secret_hash, redirect_uris, grant_types, client_name, client_uri, logo_uri)
        VALUES (p_id::uuid, p_registration::auth.oauth_registration_type, p_type::auth.oauth_client_type, p_method,
          p_secret_hash, p_redirect_uris, p_grant_types, p_name, p_uri, p_logo)
        RETURNING (rowgate.oauth_client_of(c)).* $$;

CREATE OR REPLACE FUNCTION rowgate.oauth_client_get(p_id text) RETURNS SETOF rowgate.oauth_client
  LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
  AS $$ SELECT o.* FROM auth.oauth_clients c, rowgate.oauth_client_of(c) o
        WHERE c.id = rowgate.uuid_or_null(p_id) AND c.deleted_at IS NULL $$;

-- A page of the clients, newest first, each with how many there are in all.
CREATE OR REPLACE FUNCTION rowgate.oauth_client_list(p_offset bigint, p_limit bigint)
  RETURNS TABLE (client rowgate.oauth_client, total bigint)
  LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
  AS $$ SELECT p.client, (SELECT count(*) FROM auth.oauth_clients WHERE deleted_at IS NULL)
        FROM (SELECT rowgate.oauth_client_of(c) AS client, c.created_at, c.id FROM auth.oauth_clients c
              WHERE c.deleted_at IS NULL ORDER BY c.created_at DESC, c.id OFFSET p_offset LIMIT p_limit) p
        ORDER BY p.created_at DESC, p.id $$;

DROP FUNCTION IF EXISTS rowgate.oauth_client_save(text, text, text, text, text, text, text, text);
CREATE OR REPLACE FUNCTION rowgate.oauth_client_save(p_id text, p_method text,
    p_redirect_uris text, p_grant_types text, p_name text, p_uri text, p_logo text)
  RETURNS SETOF rowgate.oauth_client
  LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
  AS $$ UPDATE auth.oauth_clients c SET token_endpoint_auth_method = p_method,
          redirect_uris = p_redirect_uris, grant_types = p_grant_types, client_name = p_name, client_uri = p_uri,
          logo_uri = p_logo, updated_at = now()
        WHERE c.id = rowgate.uuid_or_null(p_id) AND c.deleted_at IS NULL
        RETURNING (rowgate.oauth_client_of(c)).* $$;

CREATE OR REPLACE FUNCTION rowgate.oauth_client_secret(p_id text, p_secret_hash text)
  RETURNS SETOF rowgate.oauth_client
  LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
  AS $$ UPDATE auth.oauth_clients c SET client_secret_hash = p_secret_hash, updated_at = now()
        WHERE c.id = rowgate.uuid_or_null(p_id) AND c.deleted_at IS NULL
        RETURNING (rowgate.oauth_client_of(c)).* $$;

CREATE OR REPLACE FUNCTION rowgate.oauth_client_delete(p_id text) RETURNS boolean
  LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
  AS $$ WITH gone AS (UPDATE auth.oauth_clients SET deleted_at = now(), updated_at = now()
                      WHERE id = rowgate.uuid_or_null(p_id) AND deleted_at IS NULL RETURNING 1)
        SELECT count(*) > 0 FROM gone $$;

-- What applications asked users for at /oauth/authorize, and how far each got (GoTrue's table;
-- a code is kept as its SHA-256, hex, where GoTrue keeps it plain).
DO $$ BEGIN
  CREATE TYPE auth.oauth_authorization_status AS ENUM ('pending', 'approved', 'denied', 'expired');
EXCEPTION WHEN duplicate_object THEN NULL; END $$;
DO $$ BEGIN
  CREATE TYPE auth.oauth_response_type AS ENUM ('code');
EXCEPTION WHEN duplicate_object THEN NULL; END $$;
CREATE TABLE IF NOT EXISTS auth.oauth_authorizations (
  id uuid NOT NULL PRIMARY KEY,
  authorization_id text NOT NULL UNIQUE,
  client_id uuid NOT NULL REFERENCES auth.oauth_clients (id) ON DELETE CASCADE,
  user_id uuid REFERENCES auth.users (id) ON DELETE CASCADE,
  redirect_uri text NOT NULL CHECK (char_length(redirect_uri) <= 2048),
  scope text NOT NULL CHECK (char_length(scope) <= 4096),
  state text CHECK (char_length(state) <= 4096),
  resource text CHECK (char_length(resource) <= 2048),
  code_challenge text CHECK (char_length(code_challenge) <= 128),
  code_challenge_method auth.code_challenge_method,
  response_type auth.oauth_response_type NOT NULL DEFAULT 'code',
  status auth.oauth_authorization_status NOT NULL DEFAULT 'pending',
  authorization_code text UNIQUE CHECK (char_length(authorization_code) <= 255),
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL DEFAULT (now() + interval '3 minutes'),
  approved_at timestamptz,
  CONSTRAINT oauth_authorizations_expires_at_future CHECK (expires_at > created_at)
);
ALTER TABLE auth.oauth_authorizations ADD COLUMN IF NOT EXISTS nonce text CHECK (char_length(nonce) <= 255);
CREATE INDEX IF NOT EXISTS oauth_auth_pending_exp_idx ON auth.oauth_authorizations (expires_at) WHERE status = 'pending';
CREATE INDEX IF NOT EXISTS oauth_authorizations_expires_at_idx ON auth.oauth_authorizations (expires_at);

-- What users consented to, per application.
CREATE TABLE IF NOT EXISTS auth.oauth_consents (
  id uuid NOT NULL PRIMARY KEY,
  user_id uuid NOT NULL REFERENCES auth.users (id) ON DELETE CASCADE,
  client_id uuid NOT NULL REFERENCES auth.oauth_clients (id) ON DELETE CASCADE,
  scopes text NOT NULL CHECK (char_length(scopes) <= 2048 AND char_length(trim(scopes)) > 0),
  granted_at timestamptz NOT NULL DEFAULT now(),
  revoked_at timestamptz,
  CONSTRAINT oauth_consents_user_client_unique UNIQUE (user_id, client_id)
);
CREATE INDEX IF NOT EXISTS oauth_consents_user_order_idx ON auth.oauth_consents (user_id, granted_at DESC);

DO $$ BEGIN
  ALTER TABLE auth.sessions ADD CONSTRAINT sessions_oauth_client_id_fkey
    FOREIGN KEY (oauth_client_id) REFERENCES auth.oauth_clients (id) ON DELETE CASCADE;
EXCEPTION WHEN duplicate_object THEN NULL; END $$;
CREATE INDEX IF NOT EXISTS sessions_oauth_client_id_idx ON auth.sessions (oauth_client_id);

DROP TYPE IF EXISTS rowgate.oauth_authorization CASCADE;
CREATE TYPE rowgate.oauth_authorization AS (
  id text, client_id text, user_id text, redirect_uri text, scope text, state text, resource text,
  code_challenge text, code_challenge_method text, nonce text, status text, expires_at bigint
);

CREATE OR REPLACE FUNCTION rowgate.oauth_authorization_of(a auth.oauth_authorizations)
  RETURNS rowgate.oauth_authorization
  LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp
  AS $$ SELECT ROW(a.authorization_id, a.client_id::text, a.user_id::text, a.redirect_uri, a.scope, a.state,
                   a.resource, a.code_challenge, a.code_challenge_method::text, a.nonce, a.status::text,
                   extract(epoch FROM a.expires_at)::bigint)::rowgate.oauth_authorization $$;

CREATE OR REPLACE FUNCTION rowgate.oauth_authorization_begin(p_id text, p_client text, p_redirect text, p_scope text,
    p_state text, p_resource text, p_challenge text, p_method text, p_nonce text, p_expires bigint)
  RETURNS void
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
  AS $$
  BEGIN
    DELETE FROM auth.oauth_authorizations WHERE expires_at < now();
    INSERT INTO auth.oauth_authorizations (id, authorization_id, client_id, redirect_uri, scope, state, resource,
        code_challenge, code_challenge_method, nonce, expires_at)
      VALUES (gen_random_uuid(), p_id, p_client::uuid, p_redirect, p_scope, p_state, p_resource, p_challenge,
        p_method::auth.code_challenge_method, p_nonce, to_timestamp(p_expires));
  END $$;

CREATE OR REPLACE FUNCTION rowgate.oauth_authorization_get(p_id text) RETURNS SETOF rowgate.oauth_authorization
  LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
  AS $$ SELECT o.* FROM auth.oauth_authorizations a, rowgate.oauth_authorization_of(a) o
        WHERE a.authorization_id = p_id $$;

-- The pending authorization p_id, given to p_user unless another user has it.
CREATE OR REPLACE FUNCTION rowgate.oauth_authorization_claim(p_id text, p_user text)
  RETURNS SETOF rowgate.oauth_authorization
  LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
  AS $$ UPDATE auth.oauth_authorizations a SET user_id = rowgate.uuid_or_null(p_user)
        WHERE a.authorization_id = p_id AND a.status = 'pending' AND a.expires_at > now()
          AND (a.user_id IS NULL OR a.user_id = rowgate.uuid_or_null(p_user))
        RETURNING (rowgate.oauth_authorization_of(a)).* $$;

-- p_user's decision on the pending authorization p_id: approved with the code p_code (a hash),
-- the consent to its scopes kept (added to what the user had consented to), or denied (null).
CREATE OR REPLACE FUNCTION rowgate.oauth_authorization_decide(p_id text, p_user text, p_code text)
  RETURNS SETOF rowgate.oauth_authorization
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
  AS $$
  DECLARE a auth.oauth_authorizations;
  BEGIN
    UPDATE auth.oauth_authorizations x
      SET status = CASE WHEN p_code IS NULL THEN 'denied' ELSE 'approved' END::auth.oauth_authorization_status,
          authorization_code = p_code, approved_at = CASE WHEN p_code IS NOT NULL THEN now() END
      WHERE x.authorization_id = p_id AND x.user_id = rowgate.uuid_or_null(p_user) AND x.status = 'pending'
        AND x.expires_at > now()
      RETURNING x.* INTO a;
    IF NOT FOUND THEN RETURN; END IF;
    IF p_code IS NOT NULL THEN
      INSERT INTO auth.oauth_consents AS c (id, user_id, client_id, scopes, granted_at)
        VALUES (gen_random_uuid(), a.user_id, a.client_id, a.scope, now())
        ON CONFLICT (user_id, client_id) DO UPDATE SET
          scopes = CASE WHEN c.revoked_at IS NOT NULL THEN excluded.scopes ELSE
            (SELECT string_agg(s, ' ' ORDER BY o) FROM (
               SELECT s, min(o) AS o FROM unnest(string_to_array(c.scopes || ' ' || excluded.scopes, ' ')) WITH ORDINALITY AS x (s, o)
               WHERE s <> '' GROUP BY s) y) END,
          granted_at = now(), revoked_at = NULL;
    END IF;
    RETURN QUERY SELECT (rowgate.oauth_authorization_of(a)).*;
  END $$;

-- The approved authorization of p_client whose code is p_code (a hash), used up.
DROP FUNCTION IF EXISTS rowgate.oauth_code_take(text);
CREATE OR REPLACE FUNCTION rowgate.oauth_code_take(p_code text, p_client text) RETURNS SETOF rowgate.oauth_authorization
  LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
  AS $$ DELETE FROM auth.oauth_authorizations a
        WHERE a.authorization_code = p_code AND a.status = 'approved' AND a.client_id = rowgate.uuid_or_null(p_client)
        RETURNING (rowgate.oauth_authorization_of(a)).* $$;

CREATE OR REPLACE FUNCTION rowgate.oauth_consent_get(p_user text, p_client text) RETURNS text
  LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
  AS $$ SELECT c.scopes FROM auth.oauth_consents c
        WHERE c.user_id = rowgate.uuid_or_null(p_user) AND c.client_id = rowgate.uuid_or_null(p_client)
          AND c.revoked_at IS NULL $$;

CREATE OR REPLACE FUNCTION rowgate.oauth_grants(p_user text)
  RETURNS TABLE (client rowgate.oauth_client, scopes text, granted_at text)
  LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
  AS $$ SELECT rowgate.oauth_client_of(o), c.scopes, rowgate.iso(c.granted_at)
        FROM auth.oauth_consents c JOIN auth.oauth_clients o ON o.id = c.client_id AND o.deleted_at IS NULL
        WHERE c.user_id = rowgate.uuid_or_null(p_user) AND c.revoked_at IS NULL
        ORDER BY c.granted_at DESC $$;

-- p_user's consent to p_client revoked, and the sessions that client holds for them ended.
CREATE OR REPLACE FUNCTION rowgate.oauth_grant_revoke(p_user text, p_client text) RETURNS boolean
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
  AS $$
  BEGIN
    UPDATE auth.oauth_consents SET revoked_at = now()
      WHERE user_id = rowgate.uuid_or_null(p_user) AND client_id = rowgate.uuid_or_null(p_client) AND revoked_at IS NULL;
    IF NOT FOUND THEN RETURN false; END IF;
    DELETE FROM auth.sessions
      WHERE user_id = rowgate.uuid_or_null(p_user) AND oauth_client_id = rowgate.uuid_or_null(p_client);
    RETURN true;
  END $$;
