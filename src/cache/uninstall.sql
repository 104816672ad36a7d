-- Removes what `rowgate cache install` created (the `rowgate` schema stays: API keys live there).
DROP EVENT TRIGGER IF EXISTS rowgate_cache_ddl;
DROP EVENT TRIGGER IF EXISTS rowgate_cache_drop;
DO $$
DECLARE r record;
BEGIN
  FOR r IN SELECT tgrelid::regclass AS rel FROM pg_trigger WHERE tgname = 'rowgate_cache' AND NOT tgisinternal
  LOOP
    EXECUTE format('DROP TRIGGER IF EXISTS rowgate_cache ON %s', r.rel);
  END LOOP;
END $$;
DROP FUNCTION IF EXISTS rowgate.cache_ddl();
DROP FUNCTION IF EXISTS rowgate.cache_watch(regclass);
DROP FUNCTION IF EXISTS rowgate.cache_notify();
