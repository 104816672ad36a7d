-- rowgate storage install: Supabase Storage's tables (the columns its policies read), its helper
-- functions, auth.uid()/auth.role()/auth.jwt()/auth.email() where the database has none, and the
-- few SECURITY DEFINER functions rowgate calls as the server (public buckets, signed URLs).
-- Idempotent: run again after an upgrade.

CREATE SCHEMA IF NOT EXISTS storage;

CREATE TABLE IF NOT EXISTS storage.buckets (
  id text PRIMARY KEY,
  name text NOT NULL,
  owner uuid,
  created_at timestamptz DEFAULT now(),
  updated_at timestamptz DEFAULT now(),
  public boolean DEFAULT false,
  avif_autodetection boolean DEFAULT false,
  file_size_limit bigint,
  allowed_mime_types text[],
  owner_id text
);
CREATE UNIQUE INDEX IF NOT EXISTS bname ON storage.buckets (name);

CREATE TABLE IF NOT EXISTS storage.objects (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  bucket_id text REFERENCES storage.buckets (id),
  name text,
  owner uuid,
  created_at timestamptz DEFAULT now(),
  updated_at timestamptz DEFAULT now(),
  last_accessed_at timestamptz DEFAULT now(),
  metadata jsonb,
  path_tokens text[] GENERATED ALWAYS AS (string_to_array(name, '/')) STORED,
  version text,
  owner_id text,
  user_metadata jsonb
);
CREATE UNIQUE INDEX IF NOT EXISTS bucketid_objname ON storage.objects (bucket_id, name);
CREATE INDEX IF NOT EXISTS name_prefix_search ON storage.objects (name text_pattern_ops);
-- Which stored files are still someone's (the sweep of files an interrupted write left).
CREATE INDEX IF NOT EXISTS rowgate_objects_version ON storage.objects (version);

ALTER TABLE storage.buckets ENABLE ROW LEVEL SECURITY;
ALTER TABLE storage.objects ENABLE ROW LEVEL SECURITY;

CREATE OR REPLACE FUNCTION storage.foldername(name text) RETURNS text[]
  LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE _parts text[];
BEGIN
  _parts := string_to_array(name, '/');
  RETURN _parts[1 : array_length(_parts, 1) - 1];
END $$;

CREATE OR REPLACE FUNCTION storage.filename(name text) RETURNS text
  LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE _parts text[];
BEGIN
  _parts := string_to_array(name, '/');
  RETURN _parts[array_length(_parts, 1)];
END $$;

CREATE OR REPLACE FUNCTION storage.extension(name text) RETURNS text
  LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE _parts text[]; _filename text;
BEGIN
  _parts := string_to_array(name, '/');
  _filename := _parts[array_length(_parts, 1)];
  RETURN reverse(split_part(reverse(_filename), '.', 1));
END $$;

-- auth.uid() and its kin: auth_helpers.sql, run before this file.

-- What rowgate reads and writes as the server, past row-level security: a bucket's settings
-- (size limit, media types, public), an object of a public bucket or a signed URL, a signed
-- upload, and which stored files rows still name.
CREATE OR REPLACE FUNCTION storage.rowgate_bucket(bucket text)
  RETURNS SETOF storage.buckets LANGUAGE sql STABLE SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp AS $$
  SELECT * FROM storage.buckets WHERE id = bucket $$;

CREATE OR REPLACE FUNCTION storage.rowgate_object(bucket text, object_name text)
  RETURNS SETOF storage.objects LANGUAGE sql STABLE SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp AS $$
  SELECT * FROM storage.objects WHERE bucket_id = bucket AND name = object_name $$;

CREATE OR REPLACE FUNCTION storage.rowgate_versions_in_use(versions text[])
  RETURNS SETOF text LANGUAGE sql STABLE SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp AS $$
  SELECT version FROM storage.objects WHERE version = ANY (versions) $$;

CREATE OR REPLACE FUNCTION storage.rowgate_put(
  new_id uuid, bucket text, object_name text, owner_sub text, meta jsonb, user_meta jsonb,
  new_version text, upsert boolean)
  RETURNS TABLE (id text, replaced text) LANGUAGE plpgsql SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp AS $$
DECLARE old_version text;
BEGIN
  PERFORM pg_advisory_xact_lock(hashtextextended(bucket || '/' || object_name, 7317003));
  SELECT o.version INTO old_version FROM storage.objects o WHERE o.bucket_id = bucket AND o.name = object_name;
  IF FOUND AND NOT upsert THEN
    RAISE unique_violation USING MESSAGE = 'duplicate key value violates unique constraint "bucketid_objname"';
  END IF;
  RETURN QUERY
    INSERT INTO storage.objects AS o (id, bucket_id, name, owner, owner_id, metadata, user_metadata, version)
    VALUES (new_id, bucket, object_name,
            CASE WHEN owner_sub ~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
                 THEN owner_sub::uuid END,
            owner_sub, meta, user_meta, new_version)
    ON CONFLICT (bucket_id, name) DO UPDATE SET metadata = EXCLUDED.metadata,
      user_metadata = EXCLUDED.user_metadata, version = EXCLUDED.version, owner = EXCLUDED.owner,
      owner_id = EXCLUDED.owner_id, updated_at = now()
    RETURNING o.id::text, old_version;
END $$;

REVOKE ALL ON FUNCTION storage.rowgate_bucket(text), storage.rowgate_object(text, text),
  storage.rowgate_versions_in_use(text[]),
  storage.rowgate_put(uuid, text, text, text, jsonb, jsonb, text, boolean) FROM PUBLIC;

CREATE OR REPLACE FUNCTION storage.rowgate_touch_updated_at() RETURNS trigger
  LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  NEW.updated_at := now();
  RETURN NEW;
END $$;
DROP TRIGGER IF EXISTS update_objects_updated_at ON storage.objects;
CREATE TRIGGER update_objects_updated_at BEFORE UPDATE ON storage.objects
  FOR EACH ROW EXECUTE FUNCTION storage.rowgate_touch_updated_at();
