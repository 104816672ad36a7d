//! A throwaway PostgreSQL cluster: `initdb` into a temporary directory, `pg_ctl start` on a free
//! loopback port, an immediate stop and removal on drop. Used by `rowgate demo`, the test
//! harness and the benchmarks. As root, the server runs as the `postgres` user, which
//! PostgreSQL requires.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The demo schema `rowgate demo` serves.
pub const DEMO_SQL: &str = include_str!("demo.sql");

/// A running throwaway cluster; dropping it stops the server and deletes its files.
pub struct TempCluster {
    dir: tempfile::TempDir,
    bin: PathBuf,
    port: u16,
    as_postgres: bool,
}

/// Why a cluster could not be started.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// No PostgreSQL server binaries.
    #[error("PostgreSQL is not installed: no initdb on PATH or under /usr/lib/postgresql/*/bin (install it, e.g. apt-get install postgresql)")]
    NotInstalled,
    /// A command failed.
    #[error("{command} failed: {output}")]
    Command {
        /// The command.
        command: String,
        /// Its output.
        output: String,
    },
    /// A file system or process error.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

impl TempCluster {
    /// Creates and starts a cluster with a superuser `postgres` and trust authentication on
    /// loopback only.
    pub fn start() -> Result<TempCluster, ClusterError> {
        let bin = find_bin_dir().ok_or(ClusterError::NotInstalled)?;
        let as_postgres = is_root();
        let dir = tempfile::Builder::new().prefix("rowgate-pg-").tempdir()?;
        let data = dir.path().join("data");
        let sock = dir.path().join("sock");
        std::fs::create_dir(&sock)?;
        if as_postgres {
            run(Command::new("chown").arg("-R").arg("postgres").arg(dir.path()))?;
        }
        let cluster = TempCluster { port: free_port()?, bin, dir, as_postgres };
        cluster.pg(
            "initdb",
            &["-D", path(&data), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-locale", "--no-sync"],
        )?;
        cluster.restart()?;
        Ok(cluster)
    }

    /// The loopback port the server listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The directory holding the data directory, socket and log.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// A connection URI for `user` to `database`.
    pub fn uri(&self, user: &str, database: &str) -> String {
        format!("postgres://{user}@127.0.0.1:{}/{database}", self.port)
    }

    /// Runs SQL (several statements allowed) as the superuser.
    pub async fn run_sql(&self, database: &str, sql: &str) -> Result<(), tokio_postgres::Error> {
        let config: tokio_postgres::Config = self.uri("postgres", database).parse()?;
        let client = crate::backend::postgres::connect(&config).await?;
        client.batch_execute(sql).await
    }

    /// Stops the server at once (`pg_ctl stop -m immediate`).
    pub fn stop(&self) -> Result<(), ClusterError> {
        let data = self.dir.path().join("data");
        self.pg("pg_ctl", &["-D", path(&data), "-m", "immediate", "-w", "stop"]).map(|_| ())
    }

    /// Starts the server (again, after [`TempCluster::stop`]) on its port.
    pub fn restart(&self) -> Result<(), ClusterError> {
        let data = self.dir.path().join("data");
        let log = dir_log(self.dir.path());
        let sock = self.dir.path().join("sock");
        // Durability is not needed for throwaway data; speed and quiet are. Logical decoding
        // is on for the response cache's change feed.
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off \
             -c autovacuum=off -c max_connections=300 -c shared_buffers=256MB -c TimeZone=UTC \
             -c wal_level=logical -c max_replication_slots=20 -c max_wal_senders=20",
            self.port,
            path(&sock)
        );
        self.pg("pg_ctl", &["-D", path(&data), "-l", path(&log), "-o", &options, "-w", "start"]).map(|_| ())
    }

    /// The path of a server program of this installation (`pgbench`, `psql`, ...).
    pub fn program(&self, name: &str) -> PathBuf {
        self.bin.join(name)
    }

    fn pg(&self, program: &str, args: &[&str]) -> Result<String, ClusterError> {
        let exe = self.bin.join(program);
        let mut cmd = if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(&exe);
            c
        } else {
            Command::new(&exe)
        };
        cmd.args(args).current_dir(self.dir.path());
        run(&mut cmd)
    }
}

impl Drop for TempCluster {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

fn dir_log(dir: &Path) -> PathBuf {
    dir.join("postgresql.log")
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap_or_default()
}

fn run(cmd: &mut Command) -> Result<String, ClusterError> {
    let out = cmd.output()?;
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    if out.status.success() {
        Ok(text)
    } else {
        Err(ClusterError::Command { command: format!("{cmd:?}"), output: text.trim().to_owned() })
    }
}

/// `initdb`'s directory: on PATH, else the newest `/usr/lib/postgresql/*/bin`.
pub fn find_bin_dir() -> Option<PathBuf> {
    if let Some(paths) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&paths) {
            let initdb = dir.join("initdb");
            if initdb.is_file() {
                // Debian links initdb into /usr/local/bin; use the real directory so pg_ctl and
                // pgbench of the same version are found beside it.
                let real = std::fs::canonicalize(&initdb).unwrap_or(initdb);
                return real.parent().map(Path::to_path_buf);
            }
        }
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let v = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").is_file().then_some((v, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, p)| p)
}

/// Whether this process runs as root (PostgreSQL's server programs then run as `postgres`).
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("Uid:")).map(|l| l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}
