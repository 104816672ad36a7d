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

CREATE OR REPLACE FUNCTION rowgate.oauth_client_save(p_id text, p_method text, p_secret_hash text,
    p_redirect_uris text, p_grant_types text, p_name text, p_uri text, p_logo text)
  RETURNS SETOF rowgate.oauth_client
  LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
  AS $$ UPDATE auth.oauth_clients c SET token_endpoint_auth_method = p_method, client_secret_hash = p_secret_hash,
          redirect_uris = p_redirect_uris, grant_types = p_grant_types, client_name = p_name, client_uri = p_uri,
          logo_uri = p_logo, updated_at = now()
        WHERE c.id = rowgate.uuid_or_null(p_id) AND c.deleted_at IS NULL
        RETURNING (rowgate.oauth_client_of(c)).* $$;

CREATE OR REPLACE FUNCTION rowgate.oauth_client_delete(p_id text) RETURNS boolean
  LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
  AS $$ WITH gone AS (UPDATE auth.oauth_clients SET deleted_at = now(), updated_at = now()
                      WHERE id = rowgate.uuid_or_null(p_id) AND deleted_at IS NULL RETURNING 1)
        SELECT count(*) > 0 FROM gone $$;
