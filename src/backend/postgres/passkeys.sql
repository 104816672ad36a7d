-- Passkeys (rowgate accounts install, after accounts.sql): Supabase's auth.webauthn_credentials
-- and auth.webauthn_challenges, and the functions the serving role calls on them. What checks a
-- credential is rowgate's own encoding, in rowgate_credential; GoTrue's columns are filled as far
-- as they apply (a row made by GoTrue, without it, signs no one in).

CREATE TABLE IF NOT EXISTS auth.webauthn_credentials (
  id uuid NOT NULL DEFAULT gen_random_uuid() PRIMARY KEY,
  user_id uuid NOT NULL REFERENCES auth.users (id) ON DELETE CASCADE,
  credential_id bytea NOT NULL,
  public_key bytea NOT NULL,
  attestation_type text NOT NULL DEFAULT '',
  aaguid uuid,
  sign_count bigint NOT NULL DEFAULT 0,
  transports jsonb NOT NULL DEFAULT '[]'::jsonb,
  backup_eligible boolean NOT NULL DEFAULT false,
  backed_up boolean NOT NULL DEFAULT false,
  friendly_name text NOT NULL DEFAULT '',
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  last_used_at timestamptz
);
CREATE UNIQUE INDEX IF NOT EXISTS webauthn_credentials_credential_id_key ON auth.webauthn_credentials (credential_id);
CREATE INDEX IF NOT EXISTS webauthn_credentials_user_id_idx ON auth.webauthn_credentials (user_id);
ALTER TABLE auth.webauthn_credentials ADD COLUMN IF NOT EXISTS rowgate_credential jsonb;

CREATE TABLE IF NOT EXISTS auth.webauthn_challenges (
  id uuid NOT NULL DEFAULT gen_random_uuid() PRIMARY KEY,
  user_id uuid REFERENCES auth.users (id) ON DELETE CASCADE,
  challenge_type text NOT NULL CHECK (challenge_type IN ('signup', 'registration', 'authentication')),
  session_data jsonb NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS webauthn_challenges_user_id_idx ON auth.webauthn_challenges (user_id);
CREATE INDEX IF NOT EXISTS webauthn_challenges_expires_at_idx ON auth.webauthn_challenges (expires_at);

-- A passkey as the functions below answer it.
DROP TYPE IF EXISTS rowgate.passkey CASCADE;
CREATE TYPE rowgate.passkey AS (
  id text, user_id text, friendly_name text, created_at text, last_used_at text, credential text
);

CREATE OR REPLACE FUNCTION rowgate.passkey_of(c auth.webauthn_credentials) RETURNS rowgate.passkey
  LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp
  AS $$ SELECT ROW(c.id::text, c.user_id::text, c.friendly_name, rowgate.iso(c.created_at),
                   rowgate.iso(c.last_used_at), coalesce(c.rowgate_credential::text, ''))::rowgate.passkey $$;

-- Bytes from base64url text.
CREATE OR REPLACE FUNCTION rowgate.base64url(p text) RETURNS bytea
  LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp
  AS $$ SELECT decode(translate(p, '-_', '+/') || repeat('=', (4 - length(p) % 4) % 4), 'base64') $$;

CREATE OR REPLACE FUNCTION rowgate.passkey_begin(p_id text, p_kind text, p_user text, p_state text, p_expires bigint)
  RETURNS void
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
  AS $$
  BEGIN
    DELETE FROM auth.webauthn_challenges WHERE expires_at < now();
    INSERT INTO auth.webauthn_challenges (id, user_id, challenge_type, session_data, expires_at)
      VALUES (p_id::uuid, p_user::uuid, p_kind, to_jsonb(p_state), to_timestamp(p_expires));
  END $$;

-- The ceremony used up: what it kept and when it expires (no row if there is none).
CREATE OR REPLACE FUNCTION rowgate.passkey_take(p_id text, p_kind text, p_user text)
  RETURNS TABLE (state text, expires_at bigint)
  LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
  AS $$ DELETE FROM auth.webauthn_challenges c
        WHERE c.id = rowgate.uuid_or_null(p_id) AND c.challenge_type = p_kind AND c.user_id::text IS NOT DISTINCT FROM p_user
        RETURNING c.session_data #>> '{}', extract(epoch FROM c.expires_at)::bigint $$;

CREATE OR REPLACE FUNCTION rowgate.passkey_list(p_user text) RETURNS SETOF rowgate.passkey
  LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
  AS $$ SELECT (rowgate.passkey_of(c)).* FROM auth.webauthn_credentials c
        WHERE c.user_id = rowgate.uuid_or_null(p_user) ORDER BY c.created_at, c.id $$;

-- A passkey added: 'ok' and the passkey, 'too_many' (the user has p_max) or 'exists' (the
-- credential is registered already).
CREATE OR REPLACE FUNCTION rowgate.passkey_add(p_user text, p_id text, p_credential_id text, p_credential text,
                                               p_name text, p_max bigint)
  RETURNS TABLE (outcome text, passkey rowgate.passkey)
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
  AS $$
  DECLARE c auth.webauthn_credentials;
  BEGIN
    PERFORM 1 FROM auth.users WHERE id = rowgate.uuid_or_null(p_user) FOR UPDATE;
    IF (SELECT count(*) FROM auth.webauthn_credentials w WHERE w.user_id = rowgate.uuid_or_null(p_user)) >= p_max THEN
      RETURN QUERY SELECT 'too_many'::text, NULL::rowgate.passkey;
      RETURN;
    END IF;
    INSERT INTO auth.webauthn_credentials (id, user_id, credential_id, public_key, attestation_type,
                                           friendly_name, rowgate_credential)
      VALUES (p_id::uuid, p_user::uuid, rowgate.base64url(p_credential_id),
              decode(p_credential::jsonb ->> 'key', 'base64'), 'none', p_name, p_credential::jsonb)
      ON CONFLICT DO NOTHING RETURNING * INTO c;
    IF NOT FOUND THEN
      RETURN QUERY SELECT 'exists'::text, NULL::rowgate.passkey;
      RETURN;
    END IF;
    RETURN QUERY SELECT 'ok'::text, rowgate.passkey_of(c);
  END $$;

CREATE OR REPLACE FUNCTION rowgate.passkey_by_credential(p_credential_id text) RETURNS SETOF rowgate.passkey
  LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
  AS $$ SELECT (rowgate.passkey_of(c)).* FROM auth.webauthn_credentials c
        WHERE c.credential_id = rowgate.base64url(p_credential_id) $$;

CREATE OR REPLACE FUNCTION rowgate.passkey_used(p_id text, p_credential text) RETURNS void
  LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
  AS $$ UPDATE auth.webauthn_credentials SET rowgate_credential = p_credential::jsonb,
          last_used_at = now(), updated_at = now()
        WHERE id = rowgate.uuid_or_null(p_id) $$;

CREATE OR REPLACE FUNCTION rowgate.passkey_rename(p_user text, p_id text, p_name text) RETURNS SETOF rowgate.passkey
  LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
  AS $$ UPDATE auth.webauthn_credentials c SET friendly_name = p_name, updated_at = now()
        WHERE c.id = rowgate.uuid_or_null(p_id) AND c.user_id = rowgate.uuid_or_null(p_user)
        RETURNING (rowgate.passkey_of(c)).* $$;

CREATE OR REPLACE FUNCTION rowgate.passkey_delete(p_user text, p_id text) RETURNS boolean
  LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
  AS $$ WITH gone AS (DELETE FROM auth.webauthn_credentials c WHERE c.id = rowgate.uuid_or_null(p_id) AND c.user_id = rowgate.uuid_or_null(p_user)
                      RETURNING 1)
        SELECT count(*) > 0 FROM gone $$;
