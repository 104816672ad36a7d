-- DDL (superuser only: event triggers): every schema change, grant or policy change and
-- materialized view refresh flushes every rowgate's cache, a new table is watched at once, and an altered table's
-- key columns are renewed.
CREATE OR REPLACE FUNCTION rowgate.cache_ddl() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE r record;
BEGIN
  IF tg_event = 'ddl_command_end' THEN
    IF NOT EXISTS (SELECT 1 FROM pg_event_trigger_ddl_commands()
                   WHERE schema_name IS NULL OR schema_name NOT LIKE 'pg\_temp%') THEN
      RETURN; -- temporary objects only
    END IF;
    FOR r IN SELECT c.oid FROM pg_event_trigger_ddl_commands() d JOIN pg_class c ON c.oid = d.objid
             WHERE d.command_tag IN ('CREATE TABLE', 'CREATE TABLE AS', 'SELECT INTO', 'ALTER TABLE')
               AND c.relkind IN ('r', 'p') AND c.relpersistence <> 't'
    LOOP
      BEGIN
        PERFORM rowgate.cache_watch(r.oid::regclass);
      EXCEPTION WHEN OTHERS THEN
        RAISE WARNING 'rowgate: cannot watch table %: %', r.oid::regclass, SQLERRM;
      END;
    END LOOP;
  END IF;
  PERFORM pg_notify('rowgate_cache', '*');
END $$;

DROP EVENT TRIGGER IF EXISTS rowgate_cache_ddl;
CREATE EVENT TRIGGER rowgate_cache_ddl ON ddl_command_end EXECUTE FUNCTION rowgate.cache_ddl();
DROP EVENT TRIGGER IF EXISTS rowgate_cache_drop;
CREATE EVENT TRIGGER rowgate_cache_drop ON sql_drop EXECUTE FUNCTION rowgate.cache_ddl();
