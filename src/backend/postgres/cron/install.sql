-- pg_cron's interface, with rowgate running the jobs (docs/cron.md): cron.schedule,
-- cron.unschedule, cron.alter_job, cron.job and cron.job_run_details, each role seeing and
-- changing only its own jobs. Safe to run again.

DO $$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_cron') THEN
    RAISE EXCEPTION 'the pg_cron extension is installed in this database: it runs these jobs, not rowgate';
  END IF;
END $$;

CREATE SCHEMA IF NOT EXISTS cron;
COMMENT ON SCHEMA cron IS 'rowgate: pg_cron''s jobs, run by rowgate';

-- The grammar rowgate's scheduler reads (src/cron/mod.rs): five fields, a shorthand, or
-- "N seconds".
CREATE OR REPLACE FUNCTION cron._valid_schedule(schedule text) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  s text := lower(btrim(schedule));
  fields text[];
  low int[] := '{0,0,1,1,0}';
  high int[] := '{59,23,31,12,7}';
  item text;
  step text;
  bounds text[];
  bound text;
BEGIN
  IF s ~ '^[0-9]{1,4} *seconds?$' THEN
    RETURN substring(s FROM '^[0-9]+')::int BETWEEN 1 AND 59;
  END IF;
  IF s IN ('@yearly', '@annually', '@monthly', '@weekly', '@daily', '@midnight', '@hourly') THEN
    RETURN true;
  END IF;
  fields := regexp_split_to_array(s, '\s+');
  IF s = '' OR cardinality(fields) <> 5 THEN
    RETURN false;
  END IF;
  FOR i IN 1..5 LOOP
    FOREACH item IN ARRAY string_to_array(fields[i], ',') LOOP
      IF item !~ '^[0-9a-z*$-]+(/[0-9]{1,4})?$' THEN
        RETURN false;
      END IF;
      step := substring(item FROM '/([0-9]+)$');
      IF step IS NOT NULL AND step::int = 0 THEN
        RETURN false;
      END IF;
      bounds := string_to_array(split_part(item, '/', 1), '-');
      IF cardinality(bounds) = 1 AND bounds[1] IN ('*', '$') THEN
        IF bounds[1] = '$' AND i <> 3 THEN
          RETURN false;
        END IF;
        CONTINUE;
      END IF;
      IF cardinality(bounds) > 2 THEN
        RETURN false;
      END IF;
      FOREACH bound IN ARRAY bounds LOOP
        IF bound ~ '^[0-9]{1,4}$' THEN
          IF bound::int NOT BETWEEN low[i] AND high[i] THEN
            RETURN false;
          END IF;
        ELSIF NOT ((i = 4 AND bound = ANY ('{jan,feb,mar,apr,may,jun,jul,aug,sep,oct,nov,dec}'))
                OR (i = 5 AND bound = ANY ('{sun,mon,tue,wed,thu,fri,sat}'))) THEN
          RETURN false;
        END IF;
      END LOOP;
      IF cardinality(bounds) = 2 AND bounds[1] ~ '^[0-9]+$' AND bounds[2] ~ '^[0-9]+$'
         AND bounds[1]::int > bounds[2]::int THEN
        RETURN false;
      END IF;
    END LOOP;
  END LOOP;
  RETURN true;
END $$;

CREATE TABLE IF NOT EXISTS cron.job (
  jobid bigserial PRIMARY KEY,
  schedule text NOT NULL,
  command text NOT NULL,
  nodename text NOT NULL DEFAULT 'localhost',
  nodeport integer NOT NULL DEFAULT coalesce(inet_server_port(), 5432),
  database text NOT NULL DEFAULT current_database(),
  username text NOT NULL DEFAULT current_user,
  active boolean NOT NULL DEFAULT true,
  jobname text,
  CONSTRAINT jobname_username_uniq UNIQUE (jobname, username),
  CONSTRAINT job_schedule_valid CHECK (cron._valid_schedule(schedule))
);

-- pg_cron's columns, then rowgate's: the tick a run is for, one run per job and tick
-- whichever instance starts it.
CREATE TABLE IF NOT EXISTS cron.job_run_details (
  jobid bigint,
  runid bigserial PRIMARY KEY,
  job_pid integer,
  database text,
  username text,
  command text,
  status text,
  return_message text,
  start_time timestamptz,
  end_time timestamptz,
  scheduled_for timestamptz,
  CONSTRAINT job_run_details_tick UNIQUE (jobid, scheduled_for)
);
CREATE INDEX IF NOT EXISTS job_run_details_jobid ON cron.job_run_details (jobid, runid);

ALTER TABLE cron.job ENABLE ROW LEVEL SECURITY;
ALTER TABLE cron.job_run_details ENABLE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS cron_job_policy ON cron.job;
CREATE POLICY cron_job_policy ON cron.job USING (username = current_user);
DROP POLICY IF EXISTS cron_job_run_details_policy ON cron.job_run_details;
CREATE POLICY cron_job_run_details_policy ON cron.job_run_details USING (username = current_user);
GRANT SELECT, INSERT, UPDATE, DELETE ON cron.job TO PUBLIC;
GRANT SELECT, DELETE ON cron.job_run_details TO PUBLIC;
GRANT USAGE ON SEQUENCE cron.job_jobid_seq TO PUBLIC;
REVOKE ALL ON SCHEMA cron FROM PUBLIC;

CREATE OR REPLACE FUNCTION cron._changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('rowgate_cron', '');
  RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS changed ON cron.job;
CREATE TRIGGER changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON cron.job
  FOR EACH STATEMENT EXECUTE FUNCTION cron._changed();

CREATE OR REPLACE FUNCTION cron._check(schedule text) RETURNS void LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  IF schedule IS NULL OR NOT cron._valid_schedule(schedule) THEN
    RAISE EXCEPTION 'invalid schedule: %', schedule USING ERRCODE = '22023';
  END IF;
END $$;

CREATE OR REPLACE FUNCTION cron.schedule(job_name text, schedule text, command text) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
  id bigint;
BEGIN
  PERFORM cron._check(schedule);
  INSERT INTO cron.job (schedule, command, jobname) VALUES (schedule, command, job_name)
    ON CONFLICT (jobname, username) DO UPDATE SET schedule = EXCLUDED.schedule, command = EXCLUDED.command
    RETURNING jobid INTO id;
  RETURN id;
END $$;

CREATE OR REPLACE FUNCTION cron.schedule(schedule text, command text) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
  id bigint;
BEGIN
  PERFORM cron._check(schedule);
  INSERT INTO cron.job (schedule, command) VALUES (schedule, command) RETURNING jobid INTO id;
  RETURN id;
END $$;

CREATE OR REPLACE FUNCTION cron.schedule_in_database(job_name text, schedule text, command text, database text,
  username text DEFAULT NULL, active boolean DEFAULT true) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
  id bigint;
BEGIN
  IF database <> current_database() THEN
    RAISE EXCEPTION 'rowgate runs jobs in its own database only, %', current_database() USING ERRCODE = '0A000';
  END IF;
  IF username IS NOT NULL AND username <> current_user THEN
    RAISE EXCEPTION 'a job runs as the role that schedules it' USING ERRCODE = '42501';
  END IF;
  id := cron.schedule(job_name, schedule, command);
  UPDATE cron.job SET active = schedule_in_database.active WHERE jobid = id;
  RETURN id;
END $$;

CREATE OR REPLACE FUNCTION cron.unschedule(job_id bigint) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM cron.job WHERE jobid = job_id;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'could not find valid entry for job %', job_id;
  END IF;
  RETURN true;
END $$;

CREATE OR REPLACE FUNCTION cron.unschedule(job_name text) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM cron.job WHERE jobname = job_name AND username = current_user;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'could not find valid entry for job ''%''', job_name;
  END IF;
  RETURN true;
END $$;

CREATE OR REPLACE FUNCTION cron.alter_job(job_id bigint, schedule text DEFAULT NULL, command text DEFAULT NULL,
  database text DEFAULT NULL, username text DEFAULT NULL, active boolean DEFAULT NULL) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  IF schedule IS NOT NULL THEN
    PERFORM cron._check(schedule);
  END IF;
  IF database IS NOT NULL AND database <> current_database() THEN
    RAISE EXCEPTION 'rowgate runs jobs in its own database only, %', current_database() USING ERRCODE = '0A000';
  END IF;
  IF username IS NOT NULL AND username <> current_user THEN
    RAISE EXCEPTION 'a job runs as the role that schedules it' USING ERRCODE = '42501';
  END IF;
  UPDATE cron.job j SET schedule = coalesce(alter_job.schedule, j.schedule),
    command = coalesce(alter_job.command, j.command), active = coalesce(alter_job.active, j.active)
  WHERE j.jobid = job_id;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'could not find valid entry for job %', job_id;
  END IF;
END $$;

-- The scheduler's own functions: every role's jobs, and their runs recorded.
CREATE OR REPLACE FUNCTION cron._jobs() RETURNS TABLE (jobid bigint, schedule text, command text, username text)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT jobid, schedule, command, username FROM cron.job WHERE active AND database = current_database()
$$;

CREATE OR REPLACE FUNCTION cron._start(job_id bigint, tick double precision) RETURNS bigint
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  INSERT INTO cron.job_run_details (jobid, database, username, command, status, scheduled_for)
  SELECT jobid, database, username, command, 'starting', to_timestamp(tick) FROM cron.job
  WHERE jobid = job_id AND active
  ON CONFLICT (jobid, scheduled_for) DO NOTHING
  RETURNING runid
$$;

CREATE OR REPLACE FUNCTION cron._running(run_id bigint, pid integer) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  UPDATE cron.job_run_details SET status = 'running', job_pid = pid, start_time = clock_timestamp() WHERE runid = run_id
$$;

CREATE OR REPLACE FUNCTION cron._ended(run_id bigint, succeeded boolean, message text, keep integer) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  job bigint;
BEGIN
  UPDATE cron.job_run_details
    SET status = CASE WHEN succeeded THEN 'succeeded' ELSE 'failed' END, return_message = message,
        end_time = clock_timestamp(), start_time = coalesce(start_time, clock_timestamp())
    WHERE runid = run_id RETURNING jobid INTO job;
  DELETE FROM cron.job_run_details
    WHERE jobid = job AND runid < (SELECT min(runid) FROM (SELECT runid FROM cron.job_run_details
                                     WHERE jobid = job ORDER BY runid DESC LIMIT keep) AS kept);
END $$;

REVOKE ALL ON FUNCTION cron._jobs(), cron._start(bigint, double precision), cron._running(bigint, integer),
  cron._ended(bigint, boolean, text, integer) FROM PUBLIC;
