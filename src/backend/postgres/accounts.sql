-- rowgate's built-in accounts on PostgreSQL (`rowgate accounts install`). The tables are
-- readable by no API role: the serving role reaches them only through these SECURITY DEFINER
-- functions, each doing one step of sign-up, login, refresh or logout. Refresh tokens are kept
-- as SHA-256 hashes; passwords as Argon2id hashes made by rowgate.
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
    WHERE n.nspname = 'rowgate' AND c.relname IN ('users', 'refresh_tokens') AND r.rolname <> current_user
    LIMIT 1;
  IF who IS NOT NULL THEN
    RAISE EXCEPTION 'rowgate''s accounts tables belong to %, who could read their password hashes: drop them or install as %', who, who;
  END IF;
END $$;
CREATE SCHEMA IF NOT EXISTS rowgate;
CREATE TABLE IF NOT EXISTS rowgate.users (
  id text PRIMARY KEY,
  email text NOT NULL,
  password_hash text NOT NULL,
  created_at text NOT NULL DEFAULT to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
);
CREATE UNIQUE INDEX IF NOT EXISTS users_email_key ON rowgate.users (lower(email));
CREATE TABLE IF NOT EXISTS rowgate.refresh_tokens (
  token_hash text PRIMARY KEY,
  user_id text NOT NULL REFERENCES rowgate.users (id) ON DELETE CASCADE,
  expires_at bigint NOT NULL,
  revoked boolean NOT NULL DEFAULT false
);
ALTER TABLE rowgate.refresh_tokens ADD COLUMN IF NOT EXISTS revoked_at bigint;
CREATE INDEX IF NOT EXISTS refresh_tokens_user_id ON rowgate.refresh_tokens (user_id);
REVOKE ALL ON rowgate.users, rowgate.refresh_tokens FROM PUBLIC;

-- A new account and its first session (refresh token), or no row when the address is taken
-- (whatever its case).
CREATE OR REPLACE FUNCTION rowgate.account_create(p_id text, p_email text, p_hash text, p_token text, p_expires bigint)
  RETURNS TABLE (id text, email text, created_at text)
  LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
  AS $$
    WITH u AS (
      INSERT INTO rowgate.users AS u (id, email, password_hash) VALUES (p_id, p_email, p_hash)
      ON CONFLICT DO NOTHING RETURNING u.id, u.email, u.created_at
    ), t AS (
      INSERT INTO rowgate.refresh_tokens (token_hash, user_id, expires_at) SELECT p_token, u.id, p_expires FROM u
    )
    SELECT u.id, u.email, u.created_at FROM u
  $$;

CREATE OR REPLACE FUNCTION rowgate.account_by_email(p_email text)
  RETURNS TABLE (id text, email text, created_at text, password_hash text)
  LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
  AS $$ SELECT u.id, u.email, u.created_at, u.password_hash FROM rowgate.users u WHERE lower(u.email) = lower(p_email) $$;

CREATE OR REPLACE FUNCTION rowgate.account_by_id(p_id text)
  RETURNS TABLE (id text, email text, created_at text)
  LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
  AS $$ SELECT u.id, u.email, u.created_at FROM rowgate.users u WHERE u.id = p_id $$;

CREATE OR REPLACE FUNCTION rowgate.account_store_refresh(p_user text, p_hash text, p_expires bigint)
  RETURNS void
  LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
  AS $$ INSERT INTO rowgate.refresh_tokens (token_hash, user_id, expires_at) VALUES (p_hash, p_user, p_expires) $$;

-- Rotation in one step: the presented token is used up and its successor stored. One used
-- within the last p_reuse seconds (a retry, another tab) gets the same successor again; one
-- used before that revokes all of its user's (it may have been stolen). No row: refused.
DROP FUNCTION IF EXISTS rowgate.account_rotate(text, text, bigint, bigint);
CREATE OR REPLACE FUNCTION rowgate.account_rotate(p_old text, p_new text, p_now bigint, p_expires bigint, p_reuse bigint)
  RETURNS TABLE (id text, email text, created_at text)
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
  AS $$
  DECLARE t rowgate.refresh_tokens;
  BEGIN
    SELECT * INTO t FROM rowgate.refresh_tokens r WHERE r.token_hash = p_old FOR UPDATE;
    IF NOT FOUND THEN RETURN; END IF;
    IF t.revoked AND NOT coalesce(p_now - t.revoked_at < p_reuse, false) THEN
      UPDATE rowgate.refresh_tokens r SET revoked = true, revoked_at = NULL WHERE r.user_id = t.user_id;
      RETURN;
    END IF;
    IF NOT t.revoked THEN
      UPDATE rowgate.refresh_tokens r SET revoked = true, revoked_at = p_now WHERE r.token_hash = p_old;
    END IF;
    IF t.expires_at <= p_now THEN RETURN; END IF;
    -- A reuse finds the successor (derived from the token by rowgate) stored already.
    INSERT INTO rowgate.refresh_tokens (token_hash, user_id, expires_at) VALUES (p_new, t.user_id, p_expires)
      ON CONFLICT DO NOTHING;
    RETURN QUERY SELECT u.id, u.email, u.created_at FROM rowgate.users u WHERE u.id = t.user_id;
  END $$;

CREATE OR REPLACE FUNCTION rowgate.account_logout(p_user text)
  RETURNS void
  LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
  AS $$ UPDATE rowgate.refresh_tokens SET revoked = true, revoked_at = NULL WHERE user_id = p_user $$;

REVOKE ALL ON FUNCTION rowgate.account_create(text, text, text, text, bigint), rowgate.account_by_email(text),
  rowgate.account_by_id(text), rowgate.account_store_refresh(text, text, bigint),
  rowgate.account_rotate(text, text, bigint, bigint, bigint), rowgate.account_logout(text) FROM PUBLIC;
