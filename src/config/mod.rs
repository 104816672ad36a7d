//! The one `Config`, from CLI flags, `ROWGATE_*` environment variables and a TOML file, in that
//! order of precedence. Keys are PostgREST's (`db-uri` is `--db-uri`, `ROWGATE_DB_URI` and
//! `db-uri` in TOML), so a PostgREST configuration carries over key by key.
//!
//! Loading never panics: every wrong or missing value is a [`ConfigError`] with a one-line
//! explanation, which `main` prints before exiting with status 2.

mod api_keys;
mod args;
mod cache;
mod choices;
mod db_uri;
mod file;
mod jwt;
pub mod jwt_secret;
mod openapi;
pub mod postgrest;
mod proxy_uri;
mod rate_limit;
mod realtime;
mod role_path;
mod server;
mod services;

pub use api_keys::ApiKeySettings;
pub use args::ServeArgs;
pub use cache::CacheSettings;
pub use choices::{ErrorVerbosity, LogLevel, OpenApiMode, OpenApiVersion, TxEnd};
pub use db_uri::{PgUri, RootCerts, SslMode, TlsOptions};
pub use jwt::JwtSettings;
pub use openapi::OpenApiSettings;
pub use proxy_uri::ProxyUri;
pub use rate_limit::{Rate, RateLimits};
pub use realtime::RealtimeSettings;
pub use role_path::RolePath;
pub use server::ServerSettings;
pub use services::{AccountsSettings, S3Settings, StorageSettings};

use std::path::PathBuf;
use std::time::Duration;

/// Why the configuration cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The config file could not be read.
    #[error("cannot read config file {path}: {reason}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        reason: String,
    },
    /// The config file is not valid TOML or has an unknown key or a value of the wrong type.
    #[error("invalid config file {path}: {reason}")]
    File {
        /// The file.
        path: PathBuf,
        /// What is wrong, on one line.
        reason: String,
    },
    /// A value is present but wrong.
    #[error("invalid {key}: {reason}")]
    Invalid {
        /// The key.
        key: &'static str,
        /// What is wrong.
        reason: String,
    },
}

/// Where the data lives, from `db-uri` (`sqlite:PATH`, `sqlite::memory:`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SqliteTarget {
    /// A database file.
    File(PathBuf),
    /// An in-memory database shared by this process's connections (tests).
    Memory(String),
}

impl SqliteTarget {
    /// The target of a `sqlite:` URI, or `None` for any other URI.
    pub fn from_uri(uri: &str) -> Option<SqliteTarget> {
        let rest = uri.strip_prefix("sqlite:")?;
        if rest == ":memory:" {
            let mut id = [0u8; 8];
            let _ = getrandom::fill(&mut id);
            let name = u64::from_le_bytes(id);
            return Some(SqliteTarget::Memory(format!("file:rowgate-{name:016x}?mode=memory&cache=shared")));
        }
        let path = rest.strip_prefix("//").unwrap_or(rest);
        Some(SqliteTarget::File(PathBuf::from(path)))
    }
}

/// The `db-uri` when none is given: an SQLite file in the working directory, created if missing.
pub const DEFAULT_DB_URI: &str = "sqlite:rowgate.db";

/// The configuration rowgate runs with, every value resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// `db-uri`.
    pub db_uri: String,
    /// The SQLite database `db-uri` names (`sqlite:PATH`, `sqlite::memory:`), if it does.
    pub sqlite: Option<SqliteTarget>,
    /// `db-schemas`; never empty, the first is the default.
    pub db_schemas: Vec<String>,
    /// `db-anon-role`.
    pub db_anon_role: Option<String>,
    /// `db-pool`.
    pub db_pool: usize,
    /// `db-pool-acquisition-timeout`.
    pub db_pool_acquisition_timeout: Duration,
    /// `db-prepared-statements`.
    pub db_prepared_statements: bool,
    /// `db-uri-direct`, when given: what LISTEN and the change feed connect to.
    pub db_uri_direct: Option<String>,
    /// `db-uri-replication`, when given: what the change feed connects to.
    pub db_uri_replication: Option<String>,
    /// `db-uri-read-replicas`.
    pub db_uri_read_replicas: Vec<String>,
    /// `db-replica-max-lag`.
    pub db_replica_max_lag: Duration,
    /// `db-max-rows`.
    pub db_max_rows: Option<u64>,
    /// `db-extra-search-path`.
    pub db_extra_search_path: Vec<String>,
    /// `db-pre-request`: the function, as written (`schema.fn` or `fn`).
    pub db_pre_request: Option<String>,
    /// `db-root-spec`: the function that answers `GET /`.
    pub db_root_spec: Option<String>,
    /// `openapi-*` and `api-docs-enabled`: the description at `GET /` and its reference page.
    pub openapi: OpenApiSettings,
    /// `db-channel`.
    pub db_channel: String,
    /// `db-channel-enabled`.
    pub db_channel_enabled: bool,
    /// `db-statement-timeout`, if non-zero.
    pub db_statement_timeout: Option<Duration>,
    /// `db-aggregates-enabled`.
    pub db_aggregates_enabled: bool,
    /// `db-plan-enabled`.
    pub db_plan_enabled: bool,
    /// `db-tx-end`.
    pub db_tx_end: TxEnd,
    /// `db-safe-updates`.
    pub db_safe_updates: bool,
    /// `server-*` and `admin-server-*`: where and how the server listens, and its bounds.
    pub server: ServerSettings,
    /// `rate-limit-client`, `rate-limit-api-key` and `rate-limit-roles`.
    pub rate_limits: RateLimits,
    /// `log-level`.
    pub log_level: LogLevel,
    /// `client-error-verbosity`.
    pub client_error_verbosity: ErrorVerbosity,
    /// `url-use-legacy-target-names`.
    pub url_use_legacy_target_names: bool,
    /// `jwt-*`: how bearer tokens are verified (and, with an HMAC secret, what rowgate signs).
    pub jwt: JwtSettings,
    /// `api-key-*`: API keys, where requests carry them and whether they must.
    pub api_keys: ApiKeySettings,
    /// `db-rules`: the SQLite backend's access rules file.
    pub db_rules: Option<PathBuf>,
    /// `db-sqlite-synchronous`: SQLite's `synchronous` pragma (`FULL` or `NORMAL`).
    pub db_sqlite_synchronous: &'static str,
    /// `accounts-*`: Supabase Auth's endpoints at `/auth/v1`.
    pub accounts: AccountsSettings,
    /// `storage-*`: Supabase Storage's endpoints at `/storage/v1`.
    pub storage: StorageSettings,
    /// `realtime-*`.
    pub realtime: RealtimeSettings,
    /// `cache-*`: the response cache.
    pub cache: CacheSettings,
    /// `static-dir`, if files are served.
    pub static_dir: Option<PathBuf>,
    /// `static-prefix`: `/` or `/path` (no trailing slash).
    pub static_prefix: String,
    /// `api-prefix`: `/` or `/path` (no trailing slash).
    pub api_prefix: String,
    /// The TOML file the configuration was read from, if any (never served as a static file).
    pub config_file: Option<PathBuf>,
    /// PostgREST's `app.settings.*` (file keys, `PGRST_APP_SETTINGS_*`): set in every database
    /// session, as PostgREST sets them in every transaction.
    pub app_settings: Vec<(String, String)>,
    /// PostgREST options the file or `PGRST_*` variables gave that rowgate does not have.
    pub ignored_postgrest_options: Vec<String>,
}

impl Config {
    /// Resolves the configuration: flags and environment (already merged by clap, flags
    /// first), then the TOML file, then defaults; then validates every value.
    pub fn load(args: &ServeArgs) -> Result<Config, ConfigError> {
        let file::Layer { args: file, app_settings, ignored: ignored_postgrest_options } =
            file::read(args.config.as_deref())?;
        let a = args.clone();
        let realtime = RealtimeSettings::from_args(&a, &file)?;
        let cache = CacheSettings::from_args(&a, &file)?;
        let openapi = OpenApiSettings::from_args(&a, &file)?;
        let api_keys = ApiKeySettings::from_args(&a, &file)?;
        let jwt = JwtSettings::from_args(&a, &file)?;
        let accounts = AccountsSettings::from_args(&a, &file)?;
        let storage = StorageSettings::from_args(&a, &file)?;
        let server = ServerSettings::from_args(&a, &file)?;
        // Options whose absence would change who gets in or where the server listens: a
        // pre-config function may set a pre-request one, and a Unix socket is no TCP port on
        // all interfaces.
        for (option, what) in [
            ("db-pre-config", "call a pre-config function"),
            ("server-unix-socket", "listen on a Unix socket"),
        ] {
            if ignored_postgrest_options.iter().any(|o| o == option) {
                return Err(invalid(
                    option,
                    format!("rowgate does not {what} yet; remove the option to serve without it"),
                ));
            }
        }
        // No database named: the embedded default, an SQLite file in the working directory.
        let db_uri = a.db_uri.or(file.db_uri).unwrap_or_else(|| DEFAULT_DB_URI.to_owned());
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
        if let Some(direct) = a.db_uri_direct.as_deref().or(file.db_uri_direct.as_deref()) {
            if sqlite.is_some() {
                return Err(invalid(
                    "db-uri-direct",
                    "a direct connection URI is PostgreSQL's; an SQLite file has no pooler in front".into(),
                ));
            }
            PgUri::parse(direct).map_err(|e| invalid("db-uri-direct", e))?;
        }
        if let Some(uri) = a.db_uri_replication.as_deref().or(file.db_uri_replication.as_deref()) {
            if sqlite.is_some() {
                return Err(invalid("db-uri-replication", "a replication connection is PostgreSQL's".into()));
            }
            PgUri::parse(uri).map_err(|e| invalid("db-uri-replication", e))?;
        }
        let db_uri_read_replicas: Vec<String> = a
            .db_uri_read_replicas
            .as_deref()
            .or(file.db_uri_read_replicas.as_deref())
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
        let db_pre_request =
            a.db_pre_request.clone().or(file.db_pre_request.clone()).filter(|f| !f.is_empty());
        let db_root_spec = a.db_root_spec.clone().or(file.db_root_spec.clone()).filter(|f| !f.is_empty());
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
        let (static_dir, static_prefix, api_prefix) = paths(
            a.static_dir.clone().or(file.static_dir.clone()),
            a.static_prefix.clone().or(file.static_prefix.clone()),
            a.api_prefix.clone().or(file.api_prefix.clone()),
        )?;
        let db_schemas = list(a.db_schemas.or(file.db_schemas).as_deref().unwrap_or("public"));
        if db_schemas.is_empty() {
            return Err(invalid("db-schemas", "no schema given".into()));
        }
        let db_pool = a.db_pool.or(file.db_pool).unwrap_or(10);
        if db_pool == 0 {
            return Err(invalid("db-pool", "must be at least 1".into()));
        }
        let db_channel = a.db_channel.or(file.db_channel).unwrap_or_else(|| "rowgate".into());
        if db_channel.is_empty() {
            return Err(invalid("db-channel", "must not be empty".into()));
        }
        let anon = a.db_anon_role.or(file.db_anon_role).filter(|r| !r.is_empty());
        if anon.as_deref().is_some_and(|r| r.eq_ignore_ascii_case("none")) {
            // PostgreSQL takes the role `none` as RESET ROLE: requests would run as the
            // authenticator.
            return Err(invalid("db-anon-role", "\"none\" is not a role requests may run as".into()));
        }
        // Both sign with jwt-secret: signed URLs, and the accounts' tokens.
        if storage.enabled && jwt.hmac_secret().is_none() {
            return Err(invalid(
                "storage-enabled",
                "signed URLs are signed with jwt-secret, which must be an HMAC secret".into(),
            ));
        }
        if accounts.enabled && jwt.hmac_secret().is_none() {
            return Err(invalid(
                "accounts-enabled",
                "accounts sign their tokens with jwt-secret, which must be an HMAC secret".into(),
            ));
        }
        Ok(Config {
            app_settings,
            ignored_postgrest_options,
            db_pre_request,
            db_root_spec,
            openapi,
            db_uri,
            sqlite,
            db_schemas,
            db_anon_role: anon,
            db_pool: db_pool as usize,
            db_pool_acquisition_timeout: Duration::from_secs(
                a.db_pool_acquisition_timeout.or(file.db_pool_acquisition_timeout).unwrap_or(10),
            ),
            db_prepared_statements: a.db_prepared_statements.or(file.db_prepared_statements).unwrap_or(true),
            db_uri_direct: a.db_uri_direct.or(file.db_uri_direct),
            db_uri_replication: a.db_uri_replication.or(file.db_uri_replication),
            db_uri_read_replicas,
            db_replica_max_lag: Duration::from_millis(
                a.db_replica_max_lag.or(file.db_replica_max_lag).unwrap_or(5000),
            ),
            db_max_rows: a.db_max_rows.or(file.db_max_rows),
            db_extra_search_path: list(
                a.db_extra_search_path.or(file.db_extra_search_path).as_deref().unwrap_or("public"),
            ),
            db_channel,
            db_channel_enabled: a.db_channel_enabled.or(file.db_channel_enabled).unwrap_or(true),
            db_statement_timeout: a
                .db_statement_timeout
                .or(file.db_statement_timeout)
                .filter(|ms| *ms > 0)
                .map(Duration::from_millis),
            db_aggregates_enabled: a.db_aggregates_enabled.or(file.db_aggregates_enabled).unwrap_or(false),
            db_plan_enabled: a.db_plan_enabled.or(file.db_plan_enabled).unwrap_or(false),
            db_tx_end: a.db_tx_end.or(file.db_tx_end).unwrap_or_default(),
            db_safe_updates: a.db_safe_updates.or(file.db_safe_updates).unwrap_or(false),
            server,
            rate_limits: RateLimits {
                client: (a.rate_limit_client.or(file.rate_limit_client).as_deref())
                    .map(Rate::parse)
                    .transpose()
                    .map_err(|e| invalid("rate-limit-client", e))?,
                api_key: (a.rate_limit_api_key.or(file.rate_limit_api_key).as_deref())
                    .map(Rate::parse)
                    .transpose()
                    .map_err(|e| invalid("rate-limit-api-key", e))?,
                roles: rate_limit::parse_roles(
                    a.rate_limit_roles.or(file.rate_limit_roles).as_deref().unwrap_or(""),
                )
                .map_err(|e| invalid("rate-limit-roles", e))?,
            },
            log_level: a.log_level.or(file.log_level).unwrap_or(LogLevel::Error),
            client_error_verbosity: a
                .client_error_verbosity
                .or(file.client_error_verbosity)
                .unwrap_or_default(),
            url_use_legacy_target_names: a
                .url_use_legacy_target_names
                .or(file.url_use_legacy_target_names)
                .unwrap_or(true),
            jwt,
            api_keys,
            db_rules: a.db_rules.or(file.db_rules),
            db_sqlite_synchronous: match a.db_sqlite_synchronous.or(file.db_sqlite_synchronous).as_deref() {
                None | Some("full") => "FULL",
                Some("normal") => "NORMAL",
                Some(other) => {
                    return Err(invalid("db-sqlite-synchronous", format!("{other:?} is not full or normal")))
                }
            },
            accounts,
            storage,
            realtime,
            cache,
            static_dir,
            static_prefix,
            api_prefix,
            config_file: args.config.clone(),
        })
    }
}

/// `static-dir`, `static-prefix` and `api-prefix`, checked so that the files and the API never
/// shadow each other: with static files the API needs a prefix of its own (`/api` by default),
/// the files may not live under it, and where the files are served above it, the directory
/// may not hold the API prefix's name.
fn paths(
    dir: Option<PathBuf>,
    static_prefix: Option<String>,
    api_prefix: Option<String>,
) -> Result<(Option<PathBuf>, String, String), ConfigError> {
    let normal = |key: &'static str, p: String| -> Result<String, ConfigError> {
        let trimmed = p.trim_end_matches('/');
        if !p.starts_with('/') || trimmed.split('/').skip(1).any(|s| s.is_empty() || s == "." || s == "..") {
            return Err(invalid(key, format!("{p:?} is not a path like /api")));
        }
        Ok(if trimmed.is_empty() { "/".to_owned() } else { trimmed.to_owned() })
    };
    let static_prefix = normal("static-prefix", static_prefix.unwrap_or_else(|| "/".into()))?;
    let Some(dir) = dir else {
        return Ok((None, static_prefix, normal("api-prefix", api_prefix.unwrap_or_else(|| "/".into()))?));
    };
    if !dir.is_dir() {
        return Err(invalid("static-dir", format!("{} is not a directory", dir.display())));
    }
    let api_prefix = normal("api-prefix", api_prefix.unwrap_or_else(|| "/api".into()))?;
    let under =
        |outer: &str, inner: &str| outer == "/" || inner == outer || inner.starts_with(&format!("{outer}/"));
    if under(&api_prefix, &static_prefix) {
        return Err(invalid(
            "api-prefix",
            format!("the API at {api_prefix} would shadow the static files at {static_prefix}: give them different paths"),
        ));
    }
    if under(&static_prefix, &api_prefix) {
        let rest = api_prefix[static_prefix.len()..].trim_start_matches('/');
        let first = rest.split('/').next().unwrap_or_default();
        if dir.join(first).exists() {
            return Err(invalid(
                "static-dir",
                format!("{} holds {first:?}, which the API at {api_prefix} would shadow", dir.display()),
            ));
        }
    }
    if static_prefix == "/" {
        if let Some(taken) = ["live", "ready", "rowgate"].into_iter().find(|n| dir.join(n).exists()) {
            return Err(invalid(
                "static-dir",
                format!("{} holds {taken:?}, which rowgate's own /{taken} would shadow", dir.display()),
            ));
        }
    }
    Ok((Some(dir), static_prefix, api_prefix))
}

fn invalid(key: &'static str, reason: String) -> ConfigError {
    ConfigError::Invalid { key, reason: reason.replace('\n', " ") }
}

/// Splits a PostgREST-style comma-separated list, trimming blanks.
fn list(value: &str) -> Vec<String> {
    value.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect()
}

#[cfg(test)]
mod tests;
