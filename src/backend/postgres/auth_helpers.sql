-- Supabase's auth helpers, which nearly every policy of a Supabase schema uses; a database that
-- has them (a Supabase project) keeps its own. Run by `rowgate accounts install` and by
-- `rowgate storage install`.
CREATE SCHEMA IF NOT EXISTS auth;
DO $$
BEGIN
  IF to_regprocedure('auth.uid()') IS NULL THEN
    CREATE FUNCTION auth.uid() RETURNS uuid LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $f$
      SELECT coalesce(nullif(current_setting('request.jwt.claim.sub', true), ''),
                      (nullif(current_setting('request.jwt.claims', true), '')::jsonb ->> 'sub'))::uuid $f$;
  END IF;
  IF to_regprocedure('auth.role()') IS NULL THEN
    CREATE FUNCTION auth.role() RETURNS text LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $f$
      SELECT coalesce(nullif(current_setting('request.jwt.claim.role', true), ''),
                      (nullif(current_setting('request.jwt.claims', true), '')::jsonb ->> 'role'))::text $f$;
  END IF;
  IF to_regprocedure('auth.email()') IS NULL THEN
    CREATE FUNCTION auth.email() RETURNS text LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $f$
      SELECT coalesce(nullif(current_setting('request.jwt.claim.email', true), ''),
                      (nullif(current_setting('request.jwt.claims', true), '')::jsonb ->> 'email'))::text $f$;
  END IF;
  IF to_regprocedure('auth.jwt()') IS NULL THEN
    CREATE FUNCTION auth.jwt() RETURNS jsonb LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $f$
      SELECT coalesce(nullif(current_setting('request.jwt.claim', true), ''),
                      nullif(current_setting('request.jwt.claims', true), ''))::jsonb $f$;
  END IF;
END $$;
GRANT USAGE ON SCHEMA auth TO PUBLIC;
GRANT EXECUTE ON FUNCTION auth.uid(), auth.role(), auth.email(), auth.jwt() TO PUBLIC;
