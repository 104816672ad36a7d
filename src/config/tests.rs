//! `Config::load`'s checks and defaults.

use super::*;

fn args(uri: Option<&str>) -> ServeArgs {
    ServeArgs { db_uri: uri.map(String::from), ..ServeArgs::default() }
}

#[test]
fn defaults_follow_postgrest() {
    let c = Config::load(&args(Some("postgres://u@localhost/db"))).unwrap();
    assert_eq!(c.db.schemas, vec!["public"]);
    assert_eq!(c.db.pool, 10);
    assert_eq!(c.server.port, 3000);
    assert_eq!(c.db.extra_search_path, vec!["public"]);
    assert_eq!(c.db.anon_role, None);
    assert_eq!(c.log_level, LogLevel::Error);
}

#[test]
fn without_a_uri_an_sqlite_file_in_the_working_directory_is_served() {
    let c = Config::load(&args(None)).unwrap();
    assert_eq!(c.db.uri, "sqlite:rowgate.db");
    assert_eq!(c.db.sqlite, Some(SqliteTarget::File("rowgate.db".into())));
    assert_eq!(c.db.sqlite_synchronous, "FULL");
}

#[test]
fn a_pre_request_function_needs_postgresql() {
    let mut a = args(None);
    a.db_pre_request = Some("auth.check".into());
    assert_eq!(
        Config::load(&a).unwrap_err().to_string(),
        "invalid db-pre-request: a pre-request function needs PostgreSQL; on SQLite the access rules file \
         (db-rules) decides who gets in"
    );
    a.db_uri = Some("postgres://u@localhost/db".into());
    assert_eq!(Config::load(&a).unwrap().db.pre_request.as_deref(), Some("auth.check"));
}

#[test]
fn sqlite_durability_is_full_or_normal() {
    let mut a = args(None);
    a.db_sqlite_synchronous = Some("normal".into());
    assert_eq!(Config::load(&a).unwrap().db.sqlite_synchronous, "NORMAL");
    a.db_sqlite_synchronous = Some("off".into());
    assert_eq!(
        Config::load(&a).unwrap_err().to_string(),
        "invalid db-sqlite-synchronous: \"off\" is not full or normal"
    );
}

#[test]
fn file_fills_what_flags_leave() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rowgate.toml");
    std::fs::write(&path, "db-uri = \"postgres://f@h/d\"\ndb-pool = 3\nserver-port = 4000\n").unwrap();
    let mut a = args(None);
    a.config = Some(path);
    a.server_port = Some(5000);
    let c = Config::load(&a).unwrap();
    assert_eq!(c.db.uri, "postgres://f@h/d");
    assert_eq!(c.db.pool, 3);
    assert_eq!(c.server.port, 5000);
}

#[test]
fn unknown_file_key_is_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rowgate.toml");
    std::fs::write(&path, "db-uri = \"postgres://f@h/d\"\ndb-pools = 3\n").unwrap();
    let mut a = args(None);
    a.config = Some(path);
    let e = Config::load(&a).unwrap_err().to_string();
    assert!(e.contains("unknown field `db-pools`"), "{e}");
    assert!(!e.contains('\n'));
}

#[test]
fn keys_are_fetched_over_https_or_from_this_machine() {
    let mut a = args(Some("postgres://u@localhost/db"));
    for ok in ["https://idp.example.com/jwks.json", "http://127.0.0.1:8080/jwks", "http://localhost/jwks"] {
        a.jwt_jwks_url = Some(ok.into());
        assert_eq!(Config::load(&a).unwrap().jwt.jwks_url.as_deref(), Some(ok));
    }
    a.jwt_jwks_url = Some("http://idp.example.com/jwks.json".into());
    assert!(Config::load(&a).unwrap_err().to_string().contains("plain http"));
    a.jwt_jwks_allow_http = Some(true);
    assert!(Config::load(&a).is_ok());
    a.jwt_jwks_url = Some("ftp://idp.example.com/jwks.json".into());
    assert!(Config::load(&a).is_err());
}

#[test]
fn the_role_none_is_no_anonymous_role() {
    let mut a = args(Some("postgres://u@localhost/db"));
    a.db_anon_role = Some("none".into());
    assert!(Config::load(&a).unwrap_err().to_string().starts_with("invalid db-anon-role"));
}

#[test]
fn bad_values_are_explained() {
    let mut a = args(Some("postgres://u@localhost/db"));
    a.db_pool = Some(0);
    assert_eq!(Config::load(&a).unwrap_err().to_string(), "invalid db-pool: must be at least 1");
    let mut a = args(Some("postgres://u@localhost/db"));
    a.server_host = Some("nowhere".into());
    assert!(Config::load(&a).unwrap_err().to_string().starts_with("invalid server-host"));
}

#[test]
fn the_admin_server_binds_the_api_s_address_unless_given_its_own() {
    let mut a = args(Some("postgres://u@localhost/db"));
    a.server_host = Some("10.0.0.5".into());
    assert_eq!(Config::load(&a).unwrap().server.admin_host.to_string(), "10.0.0.5");
    a.admin_server_host = Some("127.0.0.1".into());
    assert_eq!(Config::load(&a).unwrap().server.admin_host.to_string(), "127.0.0.1");
    a.admin_server_host = Some("somewhere".into());
    assert!(Config::load(&a).unwrap_err().to_string().contains("admin-server-host"));
}

#[test]
fn sign_ups_are_on_and_limited_unless_said_otherwise() {
    let mut a = args(Some("postgres://u@localhost/db"));
    let c = Config::load(&a).unwrap();
    assert!(c.accounts.signup_enabled);
    assert_eq!(c.accounts.signup_rate_limit.map(|r| (r.count, r.period.as_secs())), Some((30, 300)));
    a.accounts_signup_rate_limit = Some("off".into());
    assert_eq!(Config::load(&a).unwrap().accounts.signup_rate_limit, None);
    a.accounts_signup_rate_limit = Some("lots".into());
    assert!(Config::load(&a).unwrap_err().to_string().contains("accounts-signup-rate-limit"));
}

#[test]
fn mail_goes_through_smtp_only_when_set_and_never_in_the_clear_to_another_machine() {
    let mut a = args(Some("postgres://u@localhost/db"));
    let mail = Config::load(&a).unwrap().accounts.mail;
    assert_eq!((mail.smtp.is_none(), mail.autoconfirm), (true, true));
    assert_eq!(
        (mail.site_url.as_str(), mail.external_url.as_str()),
        ("http://localhost:3000", "http://localhost:3000")
    );
    a.smtp_host = Some("smtp.example.com".into());
    assert!(Config::load(&a).unwrap_err().to_string().contains("smtp-sender"));
    a.smtp_sender = Some("no-reply@example.com".into());
    let mail = Config::load(&a).unwrap().accounts.mail;
    let smtp = mail.smtp.expect("smtp");
    assert_eq!((smtp.port, smtp.tls, mail.autoconfirm), (587, super::SmtpTls::StartTls, false));
    a.smtp_tls = Some("off".into());
    assert!(Config::load(&a).unwrap_err().to_string().contains("in the clear"));
    a.smtp_host = Some("127.0.0.1".into());
    assert!(Config::load(&a).is_ok());
    a.smtp_tls = Some("tls".into());
    assert_eq!(Config::load(&a).unwrap().accounts.mail.smtp.map(|s| s.port), Some(465));
    a.smtp_user = Some("mailer".into());
    assert!(Config::load(&a).unwrap_err().to_string().contains("go together"));
    a.accounts_site_url = Some("javascript:alert(1)".into());
    a.smtp_user = None;
    assert!(Config::load(&a).unwrap_err().to_string().contains("accounts-site-url"));
}
