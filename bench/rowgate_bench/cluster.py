"""The throwaway PostgreSQL cluster of a scenario, from the rowgate binary.

`Cluster.start(rowgate_bin, directory, settings)` runs `rowgate cluster start --dir DIR
[--setting name=value ...]`, which creates the cluster in DIR/data when it holds none, starts it
on a free 127.0.0.1 port (fsync, full_page_writes and autovacuum off, logical decoding on, trust
authentication: the settings live in src/cluster.rs) or returns the one already running, and
prints its port, URI, program directory and postmaster pid as one JSON line. The directory is
kept between runs, so data sets are made once: `ensure_dataset` regenerates one only when the
marker table `bench_meta` names another. psql and pgbench come from the printed program
directory. Nothing here initdb's or pg_ctl's a cluster itself.
"""

import json
import os
import time

from . import procs


class Cluster:
    def __init__(self, rowgate_bin, directory, info):
        self.rowgate_bin, self.dir = rowgate_bin, directory
        self.port, self.bin, self.pid = info["port"], info["bin"], info["pid"]
        self._stop = procs.at_cleanup(self.stop)

    @classmethod
    def start(cls, rowgate_bin, directory, settings=()):
        """The cluster of `directory`, running with `settings` ("name=value") beside rowgate's."""
        _adopt_old_data(directory)
        cluster = cls(rowgate_bin, directory, _cluster_start(rowgate_bin, directory, settings))
        # A cluster left running by an earlier run keeps the settings it started with: restart it
        # when one of ours differs (a stopped cluster starts with them).
        if any(cluster.setting(s.split("=", 1)[0]).lower() != s.split("=", 1)[1].lower() for s in settings):
            procs.log(f"cluster in {directory} runs with other settings: restarting it")
            cluster.stop()
            cluster = cls(rowgate_bin, directory, _cluster_start(rowgate_bin, directory, settings))
        procs.log(f"PostgreSQL on 127.0.0.1:{cluster.port} ({directory})")
        return cluster

    def stop(self, mode="fast"):
        """Stops the server (the data directory stays for the next run)."""
        procs.forget(self._stop)
        procs.run([self.rowgate_bin, "cluster", "stop", "--dir", self.dir, "--mode", mode], timeout=120)
        procs.log(f"PostgreSQL stopped ({self.dir} kept)")

    def uri(self, user="postgres"):
        return f"postgres://{user}@127.0.0.1:{self.port}/postgres"

    def program(self, name):
        """A program of this PostgreSQL installation (psql, pgbench)."""
        return os.path.join(self.bin, name)

    def psql(self, sql, user="postgres", timeout=600):
        """Runs SQL (several statements allowed); returns the output, unaligned, tuples only."""
        r = procs.run([self.program("psql"), "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1",
                       "-p", str(self.port), "-U", user, "-d", "postgres", "-c", sql], timeout=timeout, check=False)
        if r.returncode != 0:
            raise RuntimeError(f"psql failed: {r.stderr.strip()}\nSQL: {sql[:300]}")
        return r.stdout.strip()

    def setting(self, name):
        return self.psql(f"SELECT current_setting('{name}')")

    def version(self):
        return self.psql("SHOW server_version")

    def ensure_roles(self, *roles):
        """The NOLOGIN roles requests run as, and `authenticator`, the login role the servers
        connect as (NOINHERIT), granted them; those that exist are kept."""
        create = "".join(f"  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{r}') THEN CREATE ROLE {r} NOLOGIN; "
                         "END IF;\n" for r in roles)
        self.psql(f"""DO $$
BEGIN
{create}  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'authenticator') THEN
    CREATE ROLE authenticator LOGIN NOINHERIT;
  END IF;
END $$;
ALTER ROLE authenticator LOGIN NOINHERIT;
GRANT {', '.join(roles)} TO authenticator;""")

    def ensure_dataset(self, dataset_id, generate):
        """Calls generate(self) unless the marker table names dataset_id, then records it;
        returns whether it generated. Bump a scenario's id when its data set changes."""
        if self.psql("SELECT to_regclass('public.bench_meta') IS NOT NULL") == "t":
            have = self.psql("SELECT dataset FROM bench_meta LIMIT 1")
            if have == dataset_id:
                procs.log(f"data set {dataset_id} present, reusing it")
                return False
            procs.log(f"data set marker is {have!r}, not {dataset_id!r}: regenerating")
        started = time.time()
        self.psql("DROP TABLE IF EXISTS bench_meta")
        generate(self)
        self.psql(f"CREATE TABLE bench_meta (dataset text); INSERT INTO bench_meta VALUES ('{dataset_id}'); CHECKPOINT")
        procs.log(f"data set {dataset_id} generated in {time.time() - started:.0f} s")
        return True


def _cluster_start(rowgate_bin, directory, settings):
    argv = [rowgate_bin, "cluster", "start", "--dir", directory]
    for s in settings:
        argv += ["--setting", s]
    r = procs.run(argv, timeout=300)
    return json.loads(r.stdout.strip().splitlines()[-1])


def _adopt_old_data(directory):
    """Before the cluster came from the rowgate binary, the runners kept it in DIR/pgdata; moved
    to DIR/data, its data sets are reused instead of generated again."""
    old, new = os.path.join(directory, "pgdata"), os.path.join(directory, "data")
    if os.path.exists(os.path.join(old, "PG_VERSION")) and not os.path.exists(new):
        os.rename(old, new)
        procs.log(f"moved {old} to {new}")
