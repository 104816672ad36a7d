-- pg_net's interface and Supabase's database webhooks, with rowgate sending the requests
-- (docs/webhooks.md). A request is a row queued inside the caller's transaction: one rolled
-- back sends nothing; rowgate sends what committed, tries again on a 5xx or no answer, and
-- records the outcome in net._http_response as pg_net does. Safe to run again.

DO $$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_net') THEN
    RAISE EXCEPTION 'the pg_net extension is installed in this database: its worker sends these requests, not rowgate';
  END IF;
END $$;

CREATE SCHEMA IF NOT EXISTS net;
COMMENT ON SCHEMA net IS 'rowgate: pg_net''s requests, sent by rowgate after commit';

DO $$
BEGIN
  CREATE DOMAIN net.http_method AS text
    CHECK (value ILIKE 'get' OR value ILIKE 'post' OR value ILIKE 'delete');
  CREATE TYPE net.request_status AS ENUM ('PENDING', 'SUCCESS', 'ERROR');
  CREATE TYPE net.http_response AS (status_code integer, headers jsonb, body text);
  CREATE TYPE net.http_response_result AS (status net.request_status, message text, response net.http_response);
EXCEPTION WHEN duplicate_object THEN NULL;
END $$;

-- pg_net's columns, then rowgate's: how many tries a request has had and may have, when it
-- is due, and until when which sender (its connection's process) holds it.
CREATE TABLE IF NOT EXISTS net.http_request_queue (
  id bigserial PRIMARY KEY,
  method net.http_method NOT NULL,
  url text NOT NULL,
  headers jsonb NOT NULL,
  body bytea,
  timeout_milliseconds integer NOT NULL,
  max_retries integer,
  attempts integer NOT NULL DEFAULT 0,
  not_before timestamptz NOT NULL DEFAULT now(),
  claimed_until timestamptz,
  claimed_by integer,
  created timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS http_request_queue_due ON net.http_request_queue (not_before);

CREATE TABLE IF NOT EXISTS net._http_response (
  id bigint,
  status_code integer,
  content_type text,
  headers jsonb,
  content text,
  timed_out boolean,
  error_msg text,
  created timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS _http_response_id ON net._http_response (id);
CREATE INDEX IF NOT EXISTS _http_response_created ON net._http_response (created);

-- Wakes the instances' senders when the queueing transaction commits (once per statement).
CREATE OR REPLACE FUNCTION net._wake() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('rowgate_net', '');
  RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS wake ON net.http_request_queue;
CREATE TRIGGER wake AFTER INSERT ON net.http_request_queue
  FOR EACH STATEMENT EXECUTE FUNCTION net._wake();

CREATE OR REPLACE FUNCTION net._urlencode_string(string varchar) RETURNS text
LANGUAGE sql IMMUTABLE STRICT AS $$
  SELECT coalesce(string_agg(
    CASE WHEN b BETWEEN 48 AND 57 OR b BETWEEN 65 AND 90 OR b BETWEEN 97 AND 122 OR b IN (45, 46, 95, 126)
      THEN chr(b) ELSE '%' || upper(lpad(to_hex(b), 2, '0')) END, '' ORDER BY i), '')
  FROM (SELECT i, get_byte(convert_to(string, 'UTF8'), i) AS b
        FROM generate_series(0, octet_length(convert_to(string, 'UTF8')) - 1) AS i) AS bytes
$$;

CREATE OR REPLACE FUNCTION net._encode_url_with_params_array(url text, params_array text[]) RETURNS text
LANGUAGE sql IMMUTABLE STRICT AS $$
  SELECT CASE WHEN cardinality(params_array) = 0 THEN url
    ELSE url || CASE WHEN position('?' IN url) > 0 THEN '&' ELSE '?' END || array_to_string(params_array, '&') END
$$;

CREATE OR REPLACE FUNCTION net._queue(method text, url text, params jsonb, headers jsonb, body bytea, timeout_milliseconds integer)
RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  request_id bigint;
  params_array text[];
BEGIN
  IF jsonb_typeof(coalesce(headers, '{}')) <> 'object' THEN
    RAISE EXCEPTION 'headers must be a JSON object';
  END IF;
  SELECT coalesce(array_agg(net._urlencode_string(key) || '=' || net._urlencode_string(value)), '{}')
    INTO params_array FROM jsonb_each_text(coalesce(params, '{}'));
  INSERT INTO net.http_request_queue (method, url, headers, body, timeout_milliseconds)
    VALUES (method, net._encode_url_with_params_array(url, params_array), coalesce(headers, '{}'), body,
            timeout_milliseconds)
    RETURNING id INTO request_id;
  RETURN request_id;
END $$;

CREATE OR REPLACE FUNCTION net.http_get(
  url text, params jsonb DEFAULT '{}'::jsonb, headers jsonb DEFAULT '{}'::jsonb,
  timeout_milliseconds integer DEFAULT 5000
) RETURNS bigint LANGUAGE sql STRICT VOLATILE AS $$
  SELECT net._queue('GET', url, params, headers, NULL, timeout_milliseconds)
$$;

CREATE OR REPLACE FUNCTION net.http_post(
  url text, body jsonb DEFAULT '{}'::jsonb, params jsonb DEFAULT '{}'::jsonb,
  headers jsonb DEFAULT '{"Content-Type": "application/json"}'::jsonb, timeout_milliseconds integer DEFAULT 5000
) RETURNS bigint LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  content_type text;
BEGIN
  SELECT value INTO content_type FROM jsonb_each_text(coalesce(headers, '{}')) WHERE lower(key) = 'content-type' LIMIT 1;
  IF content_type IS NULL THEN
    headers := coalesce(headers, '{}') || '{"Content-Type": "application/json"}';
  ELSIF content_type <> 'application/json' THEN
    RAISE EXCEPTION 'Content-Type header must be "application/json"';
  END IF;
  IF body IS NULL THEN
    RAISE EXCEPTION 'body must not be null';
  END IF;
  RETURN net._queue('POST', url, params, headers, convert_to(body::text, 'UTF8'), timeout_milliseconds);
END $$;

CREATE OR REPLACE FUNCTION net.http_delete(
  url text, params jsonb DEFAULT '{}'::jsonb, headers jsonb DEFAULT '{}'::jsonb,
  timeout_milliseconds integer DEFAULT 5000, body jsonb DEFAULT NULL
) RETURNS bigint LANGUAGE sql VOLATILE AS $$
  SELECT net._queue('DELETE', url, params, headers, convert_to(body::text, 'UTF8'), timeout_milliseconds)
$$;

CREATE OR REPLACE FUNCTION net._http_collect_response(request_id bigint, async boolean DEFAULT true)
RETURNS net.http_response_result LANGUAGE plpgsql VOLATILE STRICT AS $$
DECLARE
  rec net._http_response;
BEGIN
  LOOP
    SELECT * INTO rec FROM net._http_response r WHERE r.id = request_id ORDER BY r.created DESC LIMIT 1;
    EXIT WHEN FOUND OR async;
    PERFORM pg_sleep(0.05);
  END LOOP;
  IF NOT FOUND THEN
    IF EXISTS (SELECT 1 FROM net.http_request_queue q WHERE q.id = request_id) THEN
      RETURN ('PENDING', 'request is pending processing', NULL)::net.http_response_result;
    END IF;
    RETURN ('ERROR', 'request matching request_id not found', NULL)::net.http_response_result;
  END IF;
  IF rec.error_msg IS NOT NULL THEN
    RETURN ('ERROR', rec.error_msg, NULL)::net.http_response_result;
  END IF;
  RETURN ('SUCCESS', 'ok', (rec.status_code, rec.headers, rec.content)::net.http_response)::net.http_response_result;
END $$;

CREATE OR REPLACE FUNCTION net.http_collect_response(request_id bigint, async boolean DEFAULT true)
RETURNS net.http_response_result LANGUAGE sql VOLATILE STRICT AS $$
  SELECT net._http_collect_response(request_id, async)
$$;

REVOKE ALL ON ALL FUNCTIONS IN SCHEMA net FROM PUBLIC;
REVOKE ALL ON ALL TABLES IN SCHEMA net FROM PUBLIC;

-- Supabase's database webhooks: a trigger function taking the URL, the method, headers,
-- query parameters and a timeout (and, in rowgate, how many retries) as its arguments.
CREATE SCHEMA IF NOT EXISTS supabase_functions;

CREATE TABLE IF NOT EXISTS supabase_functions.hooks (
  id bigserial PRIMARY KEY,
  hook_table_id integer NOT NULL,
  hook_name text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  request_id bigint
);
CREATE INDEX IF NOT EXISTS supabase_functions_hooks_request_id_idx ON supabase_functions.hooks (request_id);
CREATE INDEX IF NOT EXISTS supabase_functions_hooks_h_table_id_h_name_idx
  ON supabase_functions.hooks (hook_table_id, hook_name);

CREATE OR REPLACE FUNCTION supabase_functions.http_request() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  request_id bigint;
  url text := TG_ARGV[0];
  method text := upper(coalesce(nullif(TG_ARGV[1], 'null'), 'POST'));
  headers jsonb := coalesce(nullif(TG_ARGV[2], 'null')::jsonb, '{}');
  params jsonb := coalesce(nullif(TG_ARGV[3], 'null')::jsonb, '{}');
  timeout_ms integer := coalesce(nullif(TG_ARGV[4], 'null')::integer, 1000);
  retries integer := nullif(TG_ARGV[5], 'null')::integer;
BEGIN
  IF url IS NULL OR url = 'null' THEN
    RAISE EXCEPTION 'url argument is missing';
  END IF;
  IF method = 'GET' THEN
    request_id := net.http_get(url, params, headers, timeout_ms);
  ELSIF method = 'POST' THEN
    request_id := net.http_post(url,
      jsonb_build_object('old_record', OLD, 'record', NEW, 'type', TG_OP, 'table', TG_TABLE_NAME,
                         'schema', TG_TABLE_SCHEMA),
      params, headers, timeout_ms);
  ELSE
    RAISE EXCEPTION 'method argument % is invalid', method;
  END IF;
  IF retries IS NOT NULL THEN
    UPDATE net.http_request_queue SET max_retries = retries WHERE id = request_id;
  END IF;
  INSERT INTO supabase_functions.hooks (hook_table_id, hook_name, request_id) VALUES (TG_RELID, TG_NAME, request_id);
  RETURN NEW;
END $$;
