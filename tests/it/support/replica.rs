//! A PostgreSQL primary of its own for the read replica tests (not the shared test database,
//! which may be one given in `ROWGATE_TEST_DB_URI`), and real streaming replicas of it made by
//! `pg_basebackup`, each stopped with the test process.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use rowgate::cluster::TempCluster;

use super::{block_on, sql_at, stop_with_this_process};

const SCHEMA: &str = "
CREATE ROLE web_anon NOLOGIN;
CREATE SCHEMA api;
GRANT USAGE ON SCHEMA api TO web_anon;
CREATE TABLE api.notes (id integer PRIMARY KEY, body text NOT NULL);
GRANT ALL ON api.notes TO web_anon;
-- Not in the WAL: a standby refuses to read it (0A000).
CREATE UNLOGGED TABLE api.scratch (id integer PRIMARY KEY);
INSERT INTO api.scratch VALUES (1);
GRANT SELECT ON api.scratch TO web_anon;
-- Where a read ran: true on a standby.
CREATE FUNCTION api.in_recovery() RETURNS boolean STABLE LANGUAGE sql AS 'SELECT pg_is_in_recovery()';
CREATE FUNCTION api.slow() RETURNS boolean STABLE LANGUAGE plpgsql
  AS $$ BEGIN PERFORM pg_sleep(4); RETURN pg_is_in_recovery(); END $$;
CREATE FUNCTION api.in_recovery_volatile() RETURNS boolean VOLATILE LANGUAGE sql AS 'SELECT pg_is_in_recovery()';
-- Declared STABLE, yet it writes: refused in any read-only transaction, on a replica or not.
CREATE SEQUENCE api.counter;
CREATE FUNCTION api.bump() RETURNS bigint STABLE LANGUAGE plpgsql AS $$ BEGIN RETURN nextval('api.counter'); END $$;
GRANT USAGE ON SEQUENCE api.counter TO web_anon;
";

/// The primary, started on first use with [`SCHEMA`] and `rowgate cache install` (its changes
/// read by logical decoding).
pub fn primary() -> &'static TempCluster {
    static PRIMARY: OnceLock<TempCluster> = OnceLock::new();
    PRIMARY.get_or_init(|| {
        let cluster =
            TempCluster::start().unwrap_or_else(|e| panic!("cannot start the replicas' primary: {e}"));
        stop_with_this_process(&cluster);
        sql_at(&cluster.uri("postgres", "postgres"), SCHEMA);
        // The tests make replicas at the same time: one's checkpoint may recycle the WAL another
        // pg_basebackup has yet to stream ("requested WAL segment ... has already been removed").
        sql_at(&cluster.uri("postgres", "postgres"), "ALTER SYSTEM SET wal_keep_size = '1GB'");
        sql_at(&cluster.uri("postgres", "postgres"), "SELECT pg_reload_conf()");
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_rowgate"))
            .args(["cache", "install", "--db-uri", &cluster.uri("postgres", "postgres")])
            .output()
            .expect("run rowgate cache install");
        assert!(out.status.success(), "cache install: {}", String::from_utf8_lossy(&out.stderr));
        cluster
    })
}

/// A new streaming replica of [`primary`] with `settings`, caught up with it.
pub fn replica(settings: &[&str]) -> TempCluster {
    let dir = tempfile::Builder::new().prefix("rowgate-replica-").tempdir().expect("a directory").keep();
    let settings: Vec<String> = settings.iter().map(|s| (*s).to_owned()).collect();
    let replica = TempCluster::start_replica(&dir, primary(), &settings)
        .unwrap_or_else(|e| panic!("cannot start a streaming replica: {e}"));
    stop_with_this_process(&replica);
    caught_up(&replica);
    replica
}

/// The first value `sql` returns at `uri`, as text.
pub fn value(uri: &str, sql: &str) -> String {
    let (uri, sql) = (uri.to_owned(), sql.to_owned());
    block_on(async move {
        let cfg: tokio_postgres::Config = uri.parse().expect("uri");
        let client = rowgate::backend::postgres::connect_without_tls(&cfg).await.expect("connect");
        let rows = client.simple_query(&sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
        rowgate::backend::postgres::first_value(&rows).unwrap_or_default()
    })
}

/// Waits until `replica` has replayed what the primary has written so far.
pub fn caught_up(replica: &TempCluster) {
    let target = value(&primary().uri("postgres", "postgres"), "SELECT pg_current_wal_lsn()");
    let started = Instant::now();
    while value(
        &replica.uri("postgres", "postgres"),
        &format!("SELECT pg_last_wal_replay_lsn() >= '{target}'"),
    ) != "t"
    {
        assert!(started.elapsed() < Duration::from_secs(30), "the replica did not catch up");
        std::thread::sleep(Duration::from_millis(50));
    }
}
