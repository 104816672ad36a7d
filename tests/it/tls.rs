//! TLS to PostgreSQL (`sslmode`, `sslrootcert`, `sslcert`/`sslkey` in `db-uri`, as libpq reads
//! them): a cluster of the tests' own serving a certificate the tests make with `openssl`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use rowgate::backend::postgres::{connect, PgTarget};
use rowgate::cluster::TempCluster;

use crate::support::{block_on, request_to, start_server};

/// The cluster and the files the tests made for it.
struct TlsDb {
    cluster: TempCluster,
    /// The root that signed the server's certificate (for `localhost` only) and the client's.
    ca: PathBuf,
    /// A root that signed nothing here.
    stranger_ca: PathBuf,
    /// The client certificate of the role `certuser`, and its key.
    client: (PathBuf, PathBuf),
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("the TLS tests need the openssl command: {e}"));
    assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// A new EC key `name.key` and a certificate `name.crt` for `subject`, signed by `ca` (or by
/// itself, as a root, without one), with the extensions `ext`.
fn certificate(dir: &Path, name: &str, subject: &str, ca: Option<&str>, ext: &str) {
    let (key, csr, crt, ext_file) =
        (format!("{name}.key"), format!("{name}.csr"), format!("{name}.crt"), format!("{name}.ext"));
    std::fs::write(dir.join(&ext_file), ext).unwrap();
    let curve = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", &key];
    match ca {
        None => openssl(
            dir,
            &[&["req", "-x509"][..], &curve, &["-out", &crt, "-days", "2", "-subj", subject]].concat(),
        ),
        Some(ca) => {
            openssl(dir, &[&["req"][..], &curve, &["-out", &csr, "-subj", subject]].concat());
            let (ca_crt, ca_key) = (format!("{ca}.crt"), format!("{ca}.key"));
            openssl(
                dir,
                &[
                    "x509",
                    "-req",
                    "-in",
                    &csr,
                    "-CA",
                    &ca_crt,
                    "-CAkey",
                    &ca_key,
                    "-CAcreateserial",
                    "-out",
                    &crt,
                    "-days",
                    "2",
                    "-extfile",
                    &ext_file,
                ],
            );
        }
    }
    let mut permissions = std::fs::metadata(dir.join(&key)).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o600);
    std::fs::set_permissions(dir.join(&key), permissions).unwrap();
}

fn tls_db() -> &'static TlsDb {
    static DB: OnceLock<TlsDb> = OnceLock::new();
    DB.get_or_init(|| {
        let dir = tempfile::Builder::new().prefix("rowgate-tls-").tempdir().unwrap().keep();
        let root = "basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\n";
        certificate(&dir, "ca", "/CN=rowgate test root", None, root);
        certificate(&dir, "stranger", "/CN=a stranger's root", None, root);
        let leaf = "basicConstraints=CA:FALSE\nsubjectAltName=DNS:localhost\nextendedKeyUsage=serverAuth\n";
        certificate(&dir, "server", "/CN=localhost", Some("ca"), leaf);
        certificate(&dir, "client", "/CN=certuser", Some("ca"), "extendedKeyUsage=clientAuth\n");
        let file = |name: &str| dir.join(name).display().to_string();
        let settings = [
            "ssl=on".to_owned(),
            format!("ssl_cert_file={}", file("server.crt")),
            format!("ssl_key_file={}", file("server.key")),
            format!("ssl_ca_file={}", file("ca.crt")),
        ];
        let cluster = TempCluster::start_in(&dir, &settings)
            .unwrap_or_else(|e| panic!("cannot start PostgreSQL for the TLS tests: {e}"));
        crate::support::stop_with_this_process(&cluster);
        // certuser may only come in with its certificate.
        let hba = dir.join("data/pg_hba.conf");
        let rest = std::fs::read_to_string(&hba).unwrap();
        std::fs::write(
            &hba,
            format!("hostssl all certuser 127.0.0.1/32 cert\nhost all certuser all reject\n{rest}"),
        )
        .unwrap();
        block_on(cluster.run_sql(
            "postgres",
            "SELECT pg_reload_conf();
             CREATE ROLE certuser LOGIN;
             CREATE ROLE tls_anon NOLOGIN;
             CREATE SCHEMA tls_test;
             GRANT USAGE ON SCHEMA tls_test TO tls_anon;
             CREATE TABLE tls_test.notes (id int PRIMARY KEY, body text);
             INSERT INTO tls_test.notes VALUES (1, 'first');
             GRANT SELECT ON tls_test.notes TO tls_anon;
             CREATE FUNCTION tls_test.tls() RETURNS boolean LANGUAGE sql STABLE SECURITY DEFINER
               AS 'SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()';",
        ))
        .expect("TLS test schema");
        TlsDb {
            cluster,
            ca: dir.join("ca.crt"),
            stranger_ca: dir.join("stranger.crt"),
            client: (dir.join("client.crt"), dir.join("client.key")),
        }
    })
}

/// `postgres://user@host:port/postgres?query`.
fn uri(user: &str, host: &str, query: &str) -> String {
    format!("postgres://{user}@{host}:{}/postgres?{query}", tls_db().cluster.port())
}

/// Connects as `db-uri` says and asks PostgreSQL whether the connection is encrypted.
fn encrypted(db_uri: &str) -> Result<bool, String> {
    let target = PgTarget::parse(db_uri)?;
    block_on(async move {
        let client =
            connect(&target).await.map_err(|e| format!("{e}: {:?}", std::error::Error::source(&e)))?;
        let row = client.query_one("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()", &[]).await;
        row.map(|r| r.get(0)).map_err(|e| e.to_string())
    })
}

#[test]
fn verify_full_serves_the_api_over_tls() {
    let ca = tls_db().ca.display().to_string();
    let base = start_server(rowgate::config::ServeArgs {
        db_uri: Some(uri("postgres", "localhost", &format!("sslmode=verify-full&sslrootcert={ca}"))),
        db_schemas: Some("tls_test".into()),
        db_anon_role: Some("tls_anon".into()),
        server_host: Some("127.0.0.1".into()),
        ..Default::default()
    });
    let r = request_to(&base, "GET", "/rpc/tls", &[]);
    assert_eq!((r.status, r.body.as_str()), (200, "true"));
}

#[test]
fn each_sslmode_checks_what_libpq_checks() {
    let db = tls_db();
    let (ca, stranger) = (db.ca.display().to_string(), db.stranger_ca.display().to_string());
    assert_eq!(encrypted(&uri("postgres", "127.0.0.1", "sslmode=disable")), Ok(false));
    assert_eq!(encrypted(&uri("postgres", "127.0.0.1", "")), Ok(true), "prefer encrypts when it can");
    assert_eq!(encrypted(&uri("postgres", "127.0.0.1", "sslmode=require")), Ok(true));
    // The certificate names localhost: verify-ca does not look at the name, verify-full does.
    let ca_only = format!("sslmode=verify-ca&sslrootcert={ca}");
    assert_eq!(encrypted(&uri("postgres", "127.0.0.1", &ca_only)), Ok(true));
    let full = format!("sslmode=verify-full&sslrootcert={ca}");
    assert_eq!(encrypted(&uri("postgres", "localhost", &full)), Ok(true));
    let wrong_name = encrypted(&uri("postgres", "127.0.0.1", &full)).unwrap_err();
    assert!(wrong_name.contains("NotValidForName"), "{wrong_name}");
    // A root that signed nothing here vouches for nothing; libpq's `require` with a root given
    // checks the chain.
    for mode in ["verify-ca", "verify-full", "require"] {
        let e = encrypted(&uri("postgres", "localhost", &format!("sslmode={mode}&sslrootcert={stranger}")))
            .unwrap_err();
        assert!(e.contains("UnknownIssuer"), "{mode}: {e}");
    }
    // The public roots vouch for no test certificate either.
    let e = encrypted(&uri("postgres", "localhost", "sslrootcert=system")).unwrap_err();
    assert!(e.contains("UnknownIssuer"), "{e}");
}

#[test]
fn a_client_certificate_logs_in() {
    let db = tls_db();
    let (ca, (cert, key)) = (db.ca.display(), (db.client.0.display(), db.client.1.display()));
    let with_cert = format!("sslmode=verify-full&sslrootcert={ca}&sslcert={cert}&sslkey={key}");
    assert_eq!(encrypted(&uri("certuser", "localhost", &with_cert)), Ok(true));
    let without = encrypted(&uri("certuser", "localhost", &format!("sslmode=verify-full&sslrootcert={ca}")));
    let e = without.unwrap_err();
    assert!(e.contains("certificate"), "{e}");
}

#[test]
fn without_tls_on_the_server_require_fails_and_prefer_goes_plain() {
    // The shared test cluster has TLS off.
    let plain = crate::support::harness().superuser_uri.clone();
    let e = encrypted(&format!("{plain}?sslmode=require")).unwrap_err();
    assert!(e.contains("TLS"), "{e}");
    assert_eq!(encrypted(&format!("{plain}?sslmode=prefer")), Ok(false));
}

#[test]
fn a_missing_root_file_is_named_at_start() {
    let e = PgTarget::parse("postgres://u@localhost/db?sslmode=verify-full&sslrootcert=/nowhere/root.crt")
        .err()
        .unwrap_or_default();
    assert!(e.contains("\"/nowhere/root.crt\" does not exist") && e.contains("sslrootcert=system"), "{e}");
    // The server does not start.
    let config = rowgate::config::Config::load(&rowgate::config::ServeArgs {
        db_uri: Some("postgres://u@localhost/db?sslmode=verify-ca&sslrootcert=/nowhere/root.crt".into()),
        ..Default::default()
    })
    .unwrap();
    let started =
        block_on(async move { rowgate::server::start_state(std::sync::Arc::new(config)).map(|_| ()) });
    assert!(started.unwrap_err().contains("/nowhere/root.crt"));
}

#[test]
fn the_cache_feed_reads_changes_over_tls() {
    let db = tls_db();
    let ca = db.ca.display().to_string();
    let db_uri = uri("postgres", "localhost", &format!("sslmode=verify-full&sslrootcert={ca}"));
    let out = Command::new(env!("CARGO_BIN_EXE_rowgate"))
        .args(["cache", "install", "--db-uri", &db_uri])
        .output()
        .expect("run rowgate cache install");
    assert!(out.status.success(), "cache install over TLS: {}", String::from_utf8_lossy(&out.stderr));
    let base = start_server(rowgate::config::ServeArgs {
        db_uri: Some(db_uri),
        db_schemas: Some("tls_test".into()),
        db_anon_role: Some("tls_anon".into()),
        server_host: Some("127.0.0.1".into()),
        cache_enabled: Some(true),
        ..Default::default()
    });
    let started = Instant::now();
    while !request_to(&base, "GET", "/rowgate/metrics", &[]).body.contains("rowgate_cache_live 1") {
        assert!(started.elapsed() < Duration::from_secs(10), "the change feed never became live");
        std::thread::sleep(Duration::from_millis(100));
    }
    let feed_encrypted = encrypted_feed(&db.cluster);
    assert_eq!(feed_encrypted, Some(true));
    let r = request_to(&base, "GET", "/notes?id=eq.1", &[]);
    assert_eq!(r.body, r#"[{"id":1,"body":"first"}]"#);
    assert_eq!(request_to(&base, "GET", "/notes?id=eq.1", &[]).header("x-cache"), Some("hit"));
    block_on(db.cluster.run_sql("postgres", "UPDATE tls_test.notes SET body = 'second' WHERE id = 1"))
        .unwrap();
    let started = Instant::now();
    while request_to(&base, "GET", "/notes?id=eq.1", &[]).body != r#"[{"id":1,"body":"second"}]"# {
        assert!(started.elapsed() < Duration::from_secs(5), "the change never reached the cache");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Whether the cache feed's replication connection is encrypted (`None` without one).
fn encrypted_feed(cluster: &TempCluster) -> Option<bool> {
    let config: tokio_postgres::Config = cluster.uri("postgres", "postgres").parse().unwrap();
    block_on(async move {
        let client = rowgate::backend::postgres::connect_without_tls(&config).await.unwrap();
        let sql = "SELECT bool_and(s.ssl) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) \
                   WHERE a.application_name = 'rowgate change feed'";
        client.query_one(sql, &[]).await.unwrap().get(0)
    })
}
