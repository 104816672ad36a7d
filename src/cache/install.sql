-- The response cache's change notifications (`rowgate cache install`; idempotent).
--
-- Every table outside the system schemas gets a statement-level trigger that sends the table's
-- OID on the `rowgate_cache` channel; PostgreSQL delivers it when (and only if) the
-- transaction commits, in commit order, and sends one notification per table and transaction.
CREATE SCHEMA IF NOT EXISTS rowgate;

CREATE OR REPLACE FUNCTION rowgate.cache_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('rowgate_cache', TG_RELID::text);
  RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION rowgate.cache_watch(rel regclass) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = rel AND tgname = 'rowgate_cache') THEN
    EXECUTE format('CREATE TRIGGER rowgate_cache AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON %s '
                   'FOR EACH STATEMENT EXECUTE FUNCTION rowgate.cache_notify()', rel);
  END IF;
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
