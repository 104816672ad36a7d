-- Removes what `rowgate cache install` created (the `rowgate` schema stays: API keys live there).
DROP EVENT TRIGGER IF EXISTS rowgate_cache_ddl;
DROP EVENT TRIGGER IF EXISTS rowgate_cache_drop;
DO $$
DECLARE r record;
BEGIN
  FOR r IN SELECT tgrelid::regclass AS rel, tgname FROM pg_trigger
           WHERE tgname IN ('rowgate_cache', 'rowgate_cache_ins', 'rowgate_cache_upd', 'rowgate_cache_del')
             AND NOT tgisinternal
  LOOP
    EXECUTE format('DROP TRIGGER IF EXISTS %I ON %s', r.tgname, r.rel);
  END LOOP;
END $$;
DROP FUNCTION IF EXISTS rowgate.cache_ddl();
DROP FUNCTION IF EXISTS rowgate.cache_watch(regclass);
DROP FUNCTION IF EXISTS rowgate.cache_keys(regclass);
DROP FUNCTION IF EXISTS rowgate.cache_notify();
DROP PUBLICATION IF EXISTS rowgate_cache;
