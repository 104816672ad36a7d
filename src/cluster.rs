//! A throwaway PostgreSQL cluster: `initdb` into a directory, `pg_ctl start` on a free loopback
//! port with settings for speed rather than durability. The one helper behind `rowgate demo
//! --postgres` and the test harness (a temporary directory, stopped and removed on drop) and the
//! benchmarks (`rowgate cluster start --dir`, a directory kept so that data sets are reused). As
//! root, the server runs as the `postgres` user, which PostgreSQL requires.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The demo schema `rowgate demo` serves.
pub const DEMO_SQL: &str = include_str!("demo.sql");

/// A running cluster. One started in a temporary directory ([`TempCluster::start`]) is stopped
/// and its files deleted on drop; one started in a kept directory ([`TempCluster::start_in`])
/// runs on until [`TempCluster::stop`] (or `rowgate cluster stop`).
pub struct TempCluster {
    dir: PathBuf,
    temp: Option<tempfile::TempDir>,
    bin: PathBuf,
    port: u16,
    as_postgres: bool,
    settings: Vec<String>,
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
    /// Creates and starts a cluster in a temporary directory, with a superuser `postgres` and
    /// trust authentication on loopback only.
    pub fn start() -> Result<TempCluster, ClusterError> {
        let temp = tempfile::Builder::new().prefix("rowgate-pg-").tempdir()?;
        let mut cluster = TempCluster::start_in(temp.path(), &[])?;
        cluster.temp = Some(temp);
        Ok(cluster)
    }

    /// Starts the cluster of `dir` (created by `initdb` first when `dir/data` holds none) on a
    /// free port, with `settings` (`name=value`) beside rowgate's own; it runs on when dropped.
    pub fn start_in(dir: &Path, settings: &[String]) -> Result<TempCluster, ClusterError> {
        let bin = find_bin_dir().ok_or(ClusterError::NotInstalled)?;
        let as_postgres = is_root();
        std::fs::create_dir_all(dir.join("sock"))?;
        if as_postgres {
            run(Command::new("chown").arg("-R").arg("postgres").arg(dir))?;
        }
        let data = dir.join("data");
        // Started before and still running: that cluster (with the settings it started with).
        let running = running_port(&data);
        let cluster = TempCluster {
            port: running.map_or_else(free_port, Ok)?,
            bin,
            dir: dir.to_owned(),
            temp: None,
            as_postgres,
            settings: settings.to_vec(),
        };
        if running.is_some() {
            return Ok(cluster);
        }
        if !data.join("PG_VERSION").exists() {
            let _ = std::fs::remove_dir_all(&data);
            cluster.pg(
                "initdb",
                &[
                    "-D",
                    path(&data),
                    "-U",
                    "postgres",
                    "-A",
                    "trust",
                    "-E",
                    "UTF8",
                    "--no-locale",
                    "--no-sync",
                ],
            )?;
        }
        cluster.restart()?;
        Ok(cluster)
    }

    /// Starts a streaming replica of `primary` in `dir`: its data copied by `pg_basebackup`
    /// (with the settings that make it a standby following `primary`) when `dir/data` holds
    /// none, then started as [`TempCluster::start_in`] starts a cluster.
    pub fn start_replica(
        dir: &Path,
        primary: &TempCluster,
        settings: &[String],
    ) -> Result<TempCluster, ClusterError> {
        let data = dir.join("data");
        if !data.join("PG_VERSION").exists() {
            let _ = std::fs::remove_dir_all(&data);
            std::fs::create_dir_all(dir)?;
            if primary.as_postgres {
                run(Command::new("chown").arg("-R").arg("postgres").arg(dir))?;
            }
            let port = primary.port.to_string();
            primary.pg(
                "pg_basebackup",
                &[
                    "-D",
                    path(&data),
                    "-h",
                    "127.0.0.1",
                    "-p",
                    &port,
                    "-U",
                    "postgres",
                    "-X",
                    "stream",
                    "-R",
                    "--no-sync",
                ],
            )?;
        }
        TempCluster::start_in(dir, settings)
    }

    /// Stops the cluster of `dir` if one runs there (`rowgate cluster stop`): `fast` lets
    /// sessions end and writes a checkpoint, `immediate` does neither.
    pub fn stop_in(dir: &Path, mode: &str) -> Result<(), ClusterError> {
        let bin = find_bin_dir().ok_or(ClusterError::NotInstalled)?;
        let data = dir.join("data");
        if !data.join("postmaster.pid").exists() {
            return Ok(());
        }
        let cluster = TempCluster {
            dir: dir.to_owned(),
            temp: None,
            bin,
            port: 0,
            as_postgres: is_root(),
            settings: Vec::new(),
        };
        cluster.pg("pg_ctl", &["-D", path(&data), "-m", mode, "-w", "-t", "60", "stop"]).map(drop)
    }

    /// The postmaster's process id.
    pub fn pid(&self) -> Option<u32> {
        let text = std::fs::read_to_string(self.dir.join("data").join("postmaster.pid")).ok()?;
        text.lines().next()?.trim().parse().ok()
    }

    /// The directory of the server programs (`pgbench`, `psql`, ...).
    pub fn bin_dir(&self) -> &Path {
        &self.bin
    }

    /// The loopback port the server listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The directory holding the data directory, socket and log.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A connection URI for `user` to `database`.
    pub fn uri(&self, user: &str, database: &str) -> String {
        format!("postgres://{user}@127.0.0.1:{}/{database}", self.port)
    }

    /// Runs SQL (several statements allowed) as the superuser.
    pub async fn run_sql(&self, database: &str, sql: &str) -> Result<(), tokio_postgres::Error> {
        let config: tokio_postgres::Config = self.uri("postgres", database).parse()?;
        let client = crate::backend::postgres::connect_without_tls(&config).await?;
        client.batch_execute(sql).await
    }

    /// Stops the server at once (`pg_ctl stop -m immediate`).
    pub fn stop(&self) -> Result<(), ClusterError> {
        let data = self.dir.join("data");
        self.pg("pg_ctl", &["-D", path(&data), "-m", "immediate", "-w", "stop"]).map(|_| ())
    }

    /// Starts the server (again, after [`TempCluster::stop`]) on its port.
    pub fn restart(&self) -> Result<(), ClusterError> {
        let data = self.dir.join("data");
        let log = dir_log(&self.dir);
        let sock = self.dir.join("sock");
        // Durability is not needed for throwaway data; speed and quiet are. Logical decoding
        // is on for the response cache's change feed.
        let mut options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off \
             -c autovacuum=off -c max_connections=300 -c shared_buffers=256MB -c TimeZone=UTC \
             -c wal_level=logical -c max_replication_slots=20 -c max_wal_senders=20",
            self.port,
            path(&sock)
        );
        for setting in &self.settings {
            options.push_str(" -c ");
            options.push_str(setting);
        }
        self.pg("pg_ctl", &["-D", path(&data), "-l", path(&log), "-o", &options, "-w", "start"]).map(|_| ())
    }

    /// Promotes a standby to primary (`pg_ctl promote`), as an HA manager does in a failover;
    /// waits until it takes writes.
    pub fn promote(&self) -> Result<(), ClusterError> {
        let data = self.dir.join("data");
        self.pg("pg_ctl", &["-D", path(&data), "-w", "promote"]).map(|_| ())
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
        cmd.args(args).current_dir(&self.dir);
        run(&mut cmd)
    }
}

impl Drop for TempCluster {
    fn drop(&mut self) {
        if self.temp.is_some() {
            let _ = self.stop();
        }
    }
}

/// The port of the server running on `data`, if one is: `postmaster.pid` names its process
/// (first line) and port (fourth).
fn running_port(data: &Path) -> Option<u16> {
    let text = std::fs::read_to_string(data.join("postmaster.pid")).ok()?;
    let mut lines = text.lines();
    let pid = lines.next()?.trim();
    let port = lines.nth(2)?.trim().parse().ok()?;
    Path::new("/proc").join(pid).exists().then_some(port)
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
