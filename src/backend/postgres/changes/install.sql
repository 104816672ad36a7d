-- The response cache's change notifications (`rowgate cache install`; idempotent).
--
-- With `wal_level = logical`, the install creates the publication `rowgate_cache` (all
-- tables) first and rowgate reads the changes by logical decoding; only unlogged tables, which
-- the WAL does not carry, get triggers then. Otherwise every table outside the system schemas
-- gets statement-level triggers that send the changed rows' keys on the `rowgate_cache`
-- channel; PostgreSQL delivers them when (and only if) the transaction commits, in commit order.
CREATE SCHEMA IF NOT EXISTS rowgate;

-- Which rows changed, by their key columns (the trigger's arguments): a JSON object
-- {"t": oid, "k": {"col": ["value", ...]}} of the old and new rows' values as text, so that a
-- cached answer that read only rows with other key values stays valid. A TRUNCATE, a change of
-- more than 200 rows or a payload too large for NOTIFY reports the whole table (the OID alone).
-- Its search path is pinned, as every function rowgate installs: nothing in `public` (or a
-- temporary schema) can shadow a built-in it calls.
CREATE OR REPLACE FUNCTION rowgate.cache_notify() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  changed jsonb[];
  keys jsonb;
  payload text;
BEGIN
  IF TG_NARGS = 0 OR TG_OP = 'TRUNCATE' THEN
    payload := TG_RELID::text;
  ELSE
    -- Static statements only: PL/pgSQL keeps their plans per table (a trigger function is
    -- compiled once per table it is attached to), where dynamic SQL would be planned on every
    -- write. At most 201 rows are read: more are reported as the whole table.
    IF TG_OP = 'INSERT' THEN
      changed := ARRAY(SELECT to_jsonb(r) FROM rowgate_new r LIMIT 201);
    ELSIF TG_OP = 'DELETE' THEN
      changed := ARRAY(SELECT to_jsonb(r) FROM rowgate_old r LIMIT 201);
    ELSE
      changed := ARRAY(SELECT to_jsonb(r) FROM (SELECT * FROM rowgate_new UNION ALL SELECT * FROM rowgate_old) r LIMIT 201);
    END IF;
    IF cardinality(changed) = 0 THEN
      RETURN NULL;
    END IF;
    IF cardinality(changed) > 200 THEN
      payload := TG_RELID::text;
    ELSE
      SELECT jsonb_object_agg(c, (SELECT coalesce(jsonb_agg(DISTINCT r ->> c) FILTER (WHERE r ->> c IS NOT NULL), '[]')
                                  FROM unnest(changed) r))
        INTO keys FROM unnest(TG_ARGV) c;
      payload := jsonb_build_object('t', TG_RELID::int8, 'k', keys)::text;
      IF octet_length(payload) > 7900 THEN
        payload := TG_RELID::text;
      END IF;
    END IF;
  END IF;
  -- Where changes are read from the WAL, only unlogged tables have these triggers: their
  -- message joins the decoded stream, in commit order with everything else.
  IF current_setting('wal_level') = 'logical'
     AND EXISTS (SELECT 1 FROM pg_catalog.pg_publication WHERE pubname = 'rowgate_cache') THEN
    PERFORM pg_catalog.pg_logical_emit_message(true, 'rowgate_cache', payload);
  ELSE
    PERFORM pg_catalog.pg_notify('rowgate_cache', payload);
  END IF;
  RETURN NULL;
END $$;

-- The key columns a table's notifications carry: primary key, unique and foreign key columns of
-- the types whose text form is canonical (integers, uuid, text, varchar).
CREATE OR REPLACE FUNCTION rowgate.cache_keys(rel regclass) RETURNS text[]
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
  SELECT coalesce(array_agg(DISTINCT a.attname::text ORDER BY a.attname::text), '{}')
  FROM pg_constraint con
  CROSS JOIN LATERAL unnest(con.conkey) k(attnum)
  JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.attnum
  WHERE con.conrelid = rel AND con.contype IN ('p', 'u', 'f')
    AND a.atttypid IN ('int2'::regtype, 'int4'::regtype, 'int8'::regtype, 'uuid'::regtype,
                       'text'::regtype, 'varchar'::regtype)
$$;

-- Puts the change triggers on a table, or renews them when its key columns changed: one for
-- TRUNCATE and one per INSERT/UPDATE/DELETE with transition tables (which report the rows);
-- where PostgreSQL refuses those, one trigger for every event that reports the table.
CREATE OR REPLACE FUNCTION rowgate.cache_watch(rel regclass) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  keys text[] := rowgate.cache_keys(rel);
  args text;
  current text;
  t text;
BEGIN
  -- Logical decoding reports the changes of logged tables: no trigger needed.
  IF current_setting('wal_level') = 'logical'
     AND EXISTS (SELECT 1 FROM pg_publication WHERE pubname = 'rowgate_cache')
     AND (SELECT relpersistence FROM pg_class WHERE oid = rel) = 'p' THEN
    FOREACH t IN ARRAY ARRAY['rowgate_cache', 'rowgate_cache_ins', 'rowgate_cache_upd', 'rowgate_cache_del'] LOOP
      EXECUTE format('DROP TRIGGER IF EXISTS %I ON %s', t, rel);
    END LOOP;
    RETURN;
  END IF;
  SELECT coalesce(string_agg(quote_literal(k), ', ' ORDER BY ord), '') INTO args
  FROM unnest(keys) WITH ORDINALITY u(k, ord);
  SELECT encode(tgargs, 'escape') INTO current FROM pg_trigger WHERE tgrelid = rel AND tgname = 'rowgate_cache_upd';
  IF EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = rel AND tgname = 'rowgate_cache')
     AND (current IS NOT DISTINCT FROM (SELECT string_agg(k || E'\\000', '' ORDER BY ord) FROM unnest(keys) WITH ORDINALITY u(k, ord))
          OR (cardinality(keys) = 0 AND current IS NULL)) THEN
    RETURN;
  END IF;
  FOREACH t IN ARRAY ARRAY['rowgate_cache', 'rowgate_cache_ins', 'rowgate_cache_upd', 'rowgate_cache_del'] LOOP
    EXECUTE format('DROP TRIGGER IF EXISTS %I ON %s', t, rel);
  END LOOP;
  IF cardinality(keys) > 0 THEN
    BEGIN
      EXECUTE format('CREATE TRIGGER rowgate_cache AFTER TRUNCATE ON %s '
                     'FOR EACH STATEMENT EXECUTE FUNCTION rowgate.cache_notify()', rel);
      EXECUTE format('CREATE TRIGGER rowgate_cache_ins AFTER INSERT ON %s REFERENCING NEW TABLE AS rowgate_new '
                     'FOR EACH STATEMENT EXECUTE FUNCTION rowgate.cache_notify(%s)', rel, args);
      EXECUTE format('CREATE TRIGGER rowgate_cache_upd AFTER UPDATE ON %s '
                     'REFERENCING NEW TABLE AS rowgate_new OLD TABLE AS rowgate_old '
                     'FOR EACH STATEMENT EXECUTE FUNCTION rowgate.cache_notify(%s)', rel, args);
      EXECUTE format('CREATE TRIGGER rowgate_cache_del AFTER DELETE ON %s REFERENCING OLD TABLE AS rowgate_old '
                     'FOR EACH STATEMENT EXECUTE FUNCTION rowgate.cache_notify(%s)', rel, args);
      RETURN;
    EXCEPTION WHEN feature_not_supported OR object_not_in_prerequisite_state THEN
      NULL; -- fall through to the table-level trigger
    END;
  END IF;
  EXECUTE format('CREATE TRIGGER rowgate_cache AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON %s '
                 'FOR EACH STATEMENT EXECUTE FUNCTION rowgate.cache_notify()', rel);
END $$;

DO $$
DECLARE r record;
BEGIN
  FOR r IN SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
           WHERE c.relkind IN ('r', 'p') AND c.relpersistence <> 't'
             AND n.nspname NOT IN ('pg_catalog', 'information_schema')
             AND n.nspname NOT LIKE 'pg\_toast%' AND n.nspname NOT LIKE 'pg\_temp%'
  LOOP
    BEGIN
      PERFORM rowgate.cache_watch(r.oid::regclass);
    EXCEPTION WHEN insufficient_privilege THEN
      RAISE WARNING 'rowgate: cannot watch table % (not its owner); its answers are not cached', r.oid::regclass;
    END;
  END LOOP;
END $$;
