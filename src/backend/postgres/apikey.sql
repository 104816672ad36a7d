-- rowgate's API-key store. Only a SHA-256 of each key is kept. Requests verify keys through a
-- SECURITY DEFINER function, so no API role needs to read the table itself. Changes are
-- announced on the channel rowgate_api_keys, which running rowgate servers listen on.
CREATE SCHEMA IF NOT EXISTS rowgate;
CREATE TABLE IF NOT EXISTS rowgate.api_keys (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  name text NOT NULL,
  key_hash bytea NOT NULL UNIQUE,
  key_prefix text NOT NULL,
  role text NOT NULL,
  claims jsonb NOT NULL DEFAULT '{}',
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz,
  revoked_at timestamptz
);
REVOKE ALL ON rowgate.api_keys FROM PUBLIC;

CREATE OR REPLACE FUNCTION rowgate.lookup_api_key(hash bytea)
  RETURNS TABLE (key_hash bytea, name text, role text, claims text, expires_at float8, revoked boolean)
  LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
  AS $$
    SELECT k.key_hash, k.name, k.role, k.claims::text, extract(epoch FROM k.expires_at)::float8,
           k.revoked_at IS NOT NULL
    FROM rowgate.api_keys k WHERE k.key_hash = hash
  $$;
GRANT USAGE ON SCHEMA rowgate TO PUBLIC;
REVOKE ALL ON FUNCTION rowgate.lookup_api_key(bytea) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION rowgate.lookup_api_key(bytea) TO PUBLIC;

CREATE OR REPLACE FUNCTION rowgate.api_keys_changed() RETURNS trigger
  LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$ BEGIN PERFORM pg_notify('rowgate_api_keys', ''); RETURN NULL; END $$;
DROP TRIGGER IF EXISTS api_keys_changed ON rowgate.api_keys;
CREATE TRIGGER api_keys_changed AFTER UPDATE OR DELETE OR TRUNCATE ON rowgate.api_keys
  FOR EACH STATEMENT EXECUTE FUNCTION rowgate.api_keys_changed();
