//! What `rowgate serve` says when it starts, whatever the log level: where it serves, which of
//! its APIs are on (and the flag that turns each on), who an anonymous caller is, and what is
//! missing before a caller can read anything, and the dashboard (with its one-time setup link
//! while no administrator exists) — a first run should explain itself.

use std::net::SocketAddr;

use crate::config::Config;
use crate::dashboard::Setup;

/// The lines of the banner for `config` serving at `addr`.
pub fn lines(config: &Config, addr: SocketAddr, dashboard: Option<&Setup>) -> Vec<String> {
    let host = match addr.ip() {
        ip if ip.is_unspecified() => "127.0.0.1".to_owned(),
        std::net::IpAddr::V6(ip) => format!("[{ip}]"),
        ip => ip.to_string(),
    };
    let base = format!("http://{host}:{}", addr.port());
    let database = match &config.db.sqlite {
        Some(_) if config.db.uri == crate::config::DEFAULT_DB_URI => {
            "the SQLite file ./rowgate.db (no db-uri given; created if missing)".to_owned()
        }
        Some(_) => format!("the SQLite file {}", config.db.uri.trim_start_matches("sqlite:")),
        None => "a PostgreSQL database".to_owned(),
    };
    let api = format!("{base}{}", config.api_prefix.trim_end_matches('/'));
    let mut lines = vec![
        format!("rowgate: serving {database} at {base}/"),
        format!("  REST API  {api}/<table>   (PostgREST's: supabase-js, postgrest-js)"),
    ];
    for (name, path, on, flag) in [
        ("auth", "/auth/v1", config.accounts.enabled, "--accounts-enabled true"),
        ("storage", "/storage/v1", config.storage.enabled, "--storage-enabled true"),
        ("realtime", "/realtime/v1", config.realtime.enabled, "--realtime-enabled true"),
        ("PB API", "/api/", config.pocketbase.enabled, "--pocketbase true"),
    ] {
        lines.push(match on {
            true => format!("  {name:<9} {base}{path}"),
            false => format!("  {name:<9} off ({flag})"),
        });
    }
    lines.push(match dashboard {
        None => "  dashboard off (--dashboard-enabled true)".to_owned(),
        Some(Setup::Done) => format!("  dashboard {base}/_/"),
        Some(Setup::Needed(link)) => {
            format!("  dashboard {base}/_/   first, make its administrator: {base}{link}")
        }
        Some(Setup::Unavailable(why)) => format!(
            "  dashboard {base}/_/   unavailable: {why} (on PostgreSQL, `rowgate install` makes its tables)"
        ),
    });
    if dashboard.is_some() && config.static_dir.is_some() {
        // A page of static-dir is of the dashboard's origin: its scripts could act for an
        // administrator signed in there.
        lines.push(
            "  warning   static-dir's pages share the dashboard's origin: reach the dashboard by a hostname of its own (docs/dashboard.md)"
                .to_owned(),
        );
    }
    lines.push(match &config.db.anon_role {
        Some(role) => format!("  visitors  run as {role:?}; a signed-in user as their token's role"),
        None => "  visitors  refused (401): set --db-anon-role to let them in".to_owned(),
    });
    let rules_file = config.db.rules_file();
    if let Some(path) = rules_file.as_ref().filter(|p| !p.exists()) {
        lines.push(format!(
            "  next      no access rules yet ({}): no caller may read any table; write them in the dashboard or the file (docs/sqlite.md)",
            path.display()
        ));
    } else if config.db.sqlite.is_some() && config.db.rules.is_none() && rules_file.is_none() {
        lines
            .push("  next      no --db-rules file: no caller may read any table (docs/sqlite.md)".to_owned());
    } else if config.db.sqlite.is_none() && config.accounts.enabled {
        lines.push(
            "  next      `rowgate keys` prints the anon and service_role keys a client is made with"
                .to_owned(),
        );
    }
    lines
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_bare_serve_says_where_and_what_is_missing() {
        let config = crate::config::Config::load(&crate::config::ServeArgs::default()).expect("defaults");
        let setup = crate::dashboard::Setup::Needed("/_/#/setup/TOKEN".into());
        let lines = super::lines(&config, "0.0.0.0:3000".parse().unwrap(), Some(&setup));
        assert_eq!(
            lines[0],
            "rowgate: serving the SQLite file ./rowgate.db (no db-uri given; created if missing) at http://127.0.0.1:3000/"
        );
        assert!(lines.iter().any(|l| l.contains("auth      off (--accounts-enabled true)")), "{lines:#?}");
        assert!(lines.iter().any(|l| l.contains("visitors  run as \"anon\"")), "{lines:#?}");
        assert!(lines.iter().any(|l| l.contains("no access rules yet (rowgate.rules.toml)")), "{lines:#?}");
        assert!(
            lines
                .iter()
                .any(|l| l.ends_with("make its administrator: http://127.0.0.1:3000/_/#/setup/TOKEN")),
            "{lines:#?}"
        );
    }
}
