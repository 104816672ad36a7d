-- The dashboard's administrators (not application users) and their sessions, known by their
-- token's SHA-256. Only the login role rowgate connects as may use them (granted by the
-- accounts install); the API's roles never can.
CREATE TABLE IF NOT EXISTS rowgate.dashboard_admins (
  id uuid PRIMARY KEY,
  email text NOT NULL UNIQUE,
  password_hash text NOT NULL,
  -- true for the administrator the setup link made: unique, so two at once make one.
  made_by_setup boolean UNIQUE,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS rowgate.dashboard_sessions (
  token_hash text PRIMARY KEY,
  admin_id uuid NOT NULL REFERENCES rowgate.dashboard_admins (id) ON DELETE CASCADE,
  created_at bigint NOT NULL,
  expires_at bigint NOT NULL
);
REVOKE ALL ON rowgate.dashboard_admins, rowgate.dashboard_sessions FROM PUBLIC;
