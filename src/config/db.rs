//! `db-*`: the database served — PostgreSQL by URI, or an SQLite file (the embedded default) —
//! and how rowgate uses it: the pool, the direct, replication and replica connections, the
//! schemas exposed, the anonymous role, the hooks and limits of its statements, and SQLite's
//! rules and durability. What only PostgreSQL has is refused for an SQLite file.

use std::path::PathBuf;
use std::time::Duration;

use super::{either, invalid, list, ConfigError, PgUri, ServeArgs, SqliteTarget, TxEnd, DEFAULT_DB_URI};

/// The database and how it is used (`db-*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DbSettings {
    /// `db-uri`.
    pub uri: String,
    /// The SQLite database `db-uri` names (`sqlite:PATH`, `sqlite::memory:`), if it does.
    pub sqlite: Option<SqliteTarget>,
    /// `db-schemas`; never empty, the first is the default.
    pub schemas: Vec<String>,
    /// `db-anon-role`.
    pub anon_role: Option<String>,
    /// `db-pool`.
    pub pool: usize,
    /// `db-pool-acquisition-timeout`.
    pub pool_acquisition_timeout: Duration,
    /// `db-prepared-statements`.
    pub prepared_statements: bool,
    /// `db-uri-direct`, when given: what LISTEN and the change feed connect to.
    pub uri_direct: Option<String>,
    /// `db-uri-replication`, when given: what the change feed connects to.
    pub uri_replication: Option<String>,
    /// `db-uri-read-replicas`.
    pub uri_read_replicas: Vec<String>,
    /// `db-replica-max-lag`.
    pub replica_max_lag: Duration,
    /// `db-max-rows`.
    pub max_rows: Option<u64>,
    /// `db-extra-search-path`.
    pub extra_search_path: Vec<String>,
    /// `db-pre-request`: the function, as written (`schema.fn` or `fn`).
    pub pre_request: Option<String>,
    /// `db-root-spec`: the function that answers `GET /`.
    pub root_spec: Option<String>,
    /// `db-channel`.
    pub channel: String,
    /// `db-channel-enabled`.
    pub channel_enabled: bool,
    /// `db-statement-timeout`, if non-zero.
    pub statement_timeout: Option<Duration>,
    /// `db-aggregates-enabled`.
    pub aggregates_enabled: bool,
    /// `db-plan-enabled`.
    pub plan_enabled: bool,
    /// `db-tx-end`.
    pub tx_end: TxEnd,
    /// `db-safe-updates`.
    pub safe_updates: bool,
    /// `db-rules`: the SQLite backend's access rules file.
    pub rules: Option<PathBuf>,
    /// `db-sqlite-synchronous`: SQLite's `synchronous` pragma (`FULL` or `NORMAL`).
    pub sqlite_synchronous: &'static str,
}

impl DbSettings {
    /// The SQLite access rules file: `db-rules`, or the one beside the database file
    /// ([`SqliteTarget::default_rules_path`]); `None` on PostgreSQL and for an in-memory
    /// database without `db-rules`.
    pub fn rules_file(&self) -> Option<std::path::PathBuf> {
        self.rules.clone().or_else(|| self.sqlite.as_ref()?.default_rules_path())
    }

    /// The settings from the flags and variables `a`, then the file `f`, then the defaults.
    pub(super) fn from_args(a: &ServeArgs, f: &ServeArgs) -> Result<DbSettings, ConfigError> {
        // No database named: the embedded default, an SQLite file in the working directory.
        let db_uri = either(&a.db_uri, &f.db_uri).unwrap_or_else(|| DEFAULT_DB_URI.to_owned());
        // PostgREST's `db-uri = "@file"`: the URI is the file's content.
        let db_uri = match db_uri.strip_prefix('@') {
            Some(path) => std::fs::read_to_string(path)
                .map_err(|e| invalid("db-uri", format!("cannot read {path}: {e}")))?
                .trim()
                .to_owned(),
            None => db_uri,
        };
        let sqlite = SqliteTarget::from_uri(&db_uri);
        if sqlite.is_none() {
            PgUri::parse(&db_uri).map_err(|e| invalid("db-uri", e))?;
        }
        if let Some(direct) = a.db_uri_direct.as_deref().or(f.db_uri_direct.as_deref()) {
            if sqlite.is_some() {
                return Err(invalid(
                    "db-uri-direct",
                    "a direct connection URI is PostgreSQL's; an SQLite file has no pooler in front".into(),
                ));
            }
            PgUri::parse(direct).map_err(|e| invalid("db-uri-direct", e))?;
        }
        if let Some(uri) = a.db_uri_replication.as_deref().or(f.db_uri_replication.as_deref()) {
            if sqlite.is_some() {
                return Err(invalid("db-uri-replication", "a replication connection is PostgreSQL's".into()));
            }
            PgUri::parse(uri).map_err(|e| invalid("db-uri-replication", e))?;
        }
        let db_uri_read_replicas: Vec<String> = a
            .db_uri_read_replicas
            .as_deref()
            .or(f.db_uri_read_replicas.as_deref())
            .unwrap_or("")
            .split(',')
            .map(str::trim)
            .filter(|u| !u.is_empty())
            .map(str::to_owned)
            .collect();
        if sqlite.is_some() && !db_uri_read_replicas.is_empty() {
            return Err(invalid(
                "db-uri-read-replicas",
                "read replicas are PostgreSQL's; an SQLite file is read where it is written".into(),
            ));
        }
        for uri in &db_uri_read_replicas {
            PgUri::parse(uri).map_err(|e| invalid("db-uri-read-replicas", e))?;
        }
        let db_pre_request = either(&a.db_pre_request, &f.db_pre_request).filter(|name| !name.is_empty());
        let db_root_spec = either(&a.db_root_spec, &f.db_root_spec).filter(|name| !name.is_empty());
        if sqlite.is_some() && db_root_spec.is_some() {
            return Err(invalid(
                "db-root-spec",
                "a root spec function needs PostgreSQL; an SQLite file has no functions".into(),
            ));
        }
        if sqlite.is_some() && db_pre_request.is_some() {
            return Err(invalid(
                "db-pre-request",
                "a pre-request function needs PostgreSQL; on SQLite the access rules file (db-rules) decides \
                 who gets in"
                    .into(),
            ));
        }
        let db_schemas = list(either(&a.db_schemas, &f.db_schemas).as_deref().unwrap_or("public"));
        if db_schemas.is_empty() {
            return Err(invalid("db-schemas", "no schema given".into()));
        }
        let db_pool = a.db_pool.or(f.db_pool).unwrap_or(10);
        if db_pool == 0 {
            return Err(invalid("db-pool", "must be at least 1".into()));
        }
        let db_channel = either(&a.db_channel, &f.db_channel).unwrap_or_else(|| "rowgate".into());
        if db_channel.is_empty() {
            return Err(invalid("db-channel", "must not be empty".into()));
        }
        let anon = match either(&a.db_anon_role, &f.db_anon_role) {
            Some(role) if role.is_empty() => None,
            Some(role) => Some(role),
            // On SQLite visitors are let in and the rules decide what they may do (nothing,
            // until a rule says so), as PocketBase's: a first run is usable without a flag.
            None if sqlite.is_some() => Some("anon".to_owned()),
            None => None,
        };
        if anon.as_deref().is_some_and(|r| r.eq_ignore_ascii_case("none")) {
            // PostgreSQL takes the role `none` as RESET ROLE: requests would run as the
            // authenticator.
            return Err(invalid("db-anon-role", "\"none\" is not a role requests may run as".into()));
        }
        let pool_acquisition_timeout = Duration::from_secs(
            a.db_pool_acquisition_timeout.or(f.db_pool_acquisition_timeout).unwrap_or(10),
        );
        let sqlite_synchronous =
            match a.db_sqlite_synchronous.as_deref().or(f.db_sqlite_synchronous.as_deref()) {
                None | Some("full") => "FULL",
                Some("normal") => "NORMAL",
                Some(other) => {
                    return Err(invalid("db-sqlite-synchronous", format!("{other:?} is not full or normal")))
                }
            };
        Ok(DbSettings {
            uri: db_uri,
            sqlite,
            schemas: db_schemas,
            anon_role: anon,
            pool: db_pool as usize,
            pool_acquisition_timeout,
            prepared_statements: a.db_prepared_statements.or(f.db_prepared_statements).unwrap_or(true),
            uri_direct: either(&a.db_uri_direct, &f.db_uri_direct),
            uri_replication: either(&a.db_uri_replication, &f.db_uri_replication),
            uri_read_replicas: db_uri_read_replicas,
            replica_max_lag: Duration::from_millis(
                a.db_replica_max_lag.or(f.db_replica_max_lag).unwrap_or(5000),
            ),
            max_rows: a.db_max_rows.or(f.db_max_rows),
            extra_search_path: list(
                a.db_extra_search_path.as_deref().or(f.db_extra_search_path.as_deref()).unwrap_or("public"),
            ),
            pre_request: db_pre_request,
            root_spec: db_root_spec,
            channel: db_channel,
            channel_enabled: a.db_channel_enabled.or(f.db_channel_enabled).unwrap_or(true),
            statement_timeout: a
                .db_statement_timeout
                .or(f.db_statement_timeout)
                .filter(|ms| *ms > 0)
                .map(Duration::from_millis),
            aggregates_enabled: a.db_aggregates_enabled.or(f.db_aggregates_enabled).unwrap_or(false),
            plan_enabled: a.db_plan_enabled.or(f.db_plan_enabled).unwrap_or(false),
            tx_end: a.db_tx_end.or(f.db_tx_end).unwrap_or_default(),
            safe_updates: a.db_safe_updates.or(f.db_safe_updates).unwrap_or(false),
            rules: either(&a.db_rules, &f.db_rules),
            sqlite_synchronous,
        })
    }
}
