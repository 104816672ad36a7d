//! A real PgBouncer (Debian's `pgbouncer`) in transaction mode in front of the test database,
//! as Supabase users run Supavisor: one per test binary, stopped with it. Missing, it fails the
//! tests that need it, loudly (scripts/prereqs installs it).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use super::harness;

/// Server sessions PgBouncer keeps per database and user: fewer than the clients rowgate opens,
/// so transactions of different clients share server sessions.
pub const SERVER_SESSIONS: u32 = 2;

/// The PgBouncer's port, started on first use.
pub fn port() -> u16 {
    static PORT: OnceLock<u16> = OnceLock::new();
    *PORT.get_or_init(start)
}

/// `uri` (the test database's) with its host and port replaced by PgBouncer's.
pub fn through_pgbouncer(uri: &str) -> String {
    let cfg: tokio_postgres::Config = uri.parse().expect("a database URI");
    let user = cfg.get_user().expect("a user");
    let password = cfg.get_password().map(|p| format!(":{}", String::from_utf8_lossy(p))).unwrap_or_default();
    let db = cfg.get_dbname().unwrap_or("postgres");
    format!("postgres://{user}{password}@127.0.0.1:{}/{db}", port())
}

fn program() -> PathBuf {
    ["/usr/sbin/pgbouncer", "/usr/bin/pgbouncer"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
        .expect("pgbouncer is not installed: scripts/prereqs installs Debian's pgbouncer")
}

fn start() -> u16 {
    let db: tokio_postgres::Config = harness().superuser_uri.parse().expect("superuser URI");
    let pg_port = db.get_ports().first().copied().unwrap_or(5432);
    let port = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port();
    let dir = std::env::temp_dir().join(format!("rowgate-pgbouncer-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("pgbouncer's directory");
    let d = dir.display();
    // The test database trusts loopback connections; PgBouncer checks no password either.
    std::fs::write(dir.join("users.txt"), "\"Authenticator\" \"secret\"\n\"postgres\" \"\"\n")
        .expect("users");
    let ini = format!(
        "[databases]\n* = host=127.0.0.1 port={pg_port}\n\n[pgbouncer]\nlisten_addr = 127.0.0.1\n\
         listen_port = {port}\nunix_socket_dir =\nauth_type = trust\nauth_file = {d}/users.txt\n\
         pool_mode = transaction\ndefault_pool_size = {SERVER_SESSIONS}\nmax_client_conn = 200\n\
         logfile = {d}/pgbouncer.log\npidfile = {d}/pgbouncer.pid\n"
    );
    std::fs::write(dir.join("pgbouncer.ini"), ini).expect("pgbouncer.ini");
    let mut command = std::process::Command::new(program());
    // PgBouncer refuses to run as root.
    if rowgate::cluster::is_root() {
        let _ = std::process::Command::new("chown").args(["-R", "postgres", &d.to_string()]).status();
        command.args(["-u", "postgres"]);
    }
    let child = command
        .arg(dir.join("pgbouncer.ini"))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("pgbouncer starts");
    super::stop_child_with_this_process(child, &format!("rm -rf {d}"));
    for _ in 0..200 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return port;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("pgbouncer did not listen on port {port}; its log: {}", log(&dir));
}

fn log(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("pgbouncer.log")).unwrap_or_default()
}
