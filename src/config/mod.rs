//! The one `Config`, from CLI flags, `ROWGATE_*` environment variables and a TOML file, in that
//! order of precedence. Keys are PostgREST's (`db-uri` is `--db-uri`, `ROWGATE_DB_URI` and
//! `db-uri` in TOML), so a PostgREST configuration carries over key by key.
//!
//! Loading never panics: every wrong or missing value is a [`ConfigError`] with a one-line
//! explanation, which `main` prints before exiting with status 2.

mod api_keys;
mod args;
mod backup;
mod cache;
mod choices;
mod cron;
mod dashboard;
mod db;
mod db_uri;
mod file;
mod functions;
mod jwt;
pub mod jwt_secret;
mod mail;
mod net;
mod openapi;
mod platform_args;
mod pocketbase;
pub mod postgrest;
pub mod providers;
mod proxy_uri;
mod rate_limit;
mod realtime;
mod role_path;
mod server;
mod services;
pub mod signing_keys;
mod sms;

pub use api_keys::ApiKeySettings;
pub use args::ServeArgs;
pub use backup::{parse_schedule, BackupSettings};
pub use cache::CacheSettings;
pub use choices::{ErrorVerbosity, LogLevel, OpenApiMode, OpenApiVersion, TxEnd};
pub use cron::{CronSettings, SqliteJob};
pub use dashboard::DashboardSettings;
pub use db::DbSettings;
pub use db_uri::{PgUri, RootCerts, SslMode, TlsOptions};
pub use functions::FunctionsSettings;
pub use jwt::JwtSettings;
pub use mail::{MailSettings, SmtpSettings, SmtpTls};
pub use net::{NetSettings, SqliteWebhook};
pub use openapi::OpenApiSettings;
pub use platform_args::PlatformArgs;
pub use pocketbase::PocketBaseSettings;
pub use proxy_uri::ProxyUri;
pub use rate_limit::{Rate, RateLimits};
pub use realtime::RealtimeSettings;
pub use role_path::RolePath;
pub use server::ServerSettings;
pub use services::{AccountsSettings, OAuthServerSettings, S3Settings, StorageSettings};
pub use sms::SmsSettings;

use std::path::PathBuf;

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

    /// Where a file's access rules are kept when `db-rules` names none: beside it, named after
    /// it (`rowgate.db` → `rowgate.rules.toml`); missing, it means no rules (the dashboard writes
    /// it). An in-memory database has none.
    pub fn default_rules_path(&self) -> Option<PathBuf> {
        match self {
            SqliteTarget::File(path) => Some(path.with_extension("rules.toml")),
            SqliteTarget::Memory(_) => None,
        }
    }
}

/// The `db-uri` when none is given: an SQLite file in the working directory, created if missing.
pub const DEFAULT_DB_URI: &str = "sqlite:rowgate.db";

/// The configuration rowgate runs with, every value resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// `db-*`: the database served and how rowgate uses it.
    pub db: DbSettings,
    /// `openapi-*` and `api-docs-enabled`: the description at `GET /` and its reference page.
    pub openapi: OpenApiSettings,
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
    /// `accounts-*`: Supabase Auth's endpoints at `/auth/v1`.
    pub accounts: AccountsSettings,
    /// `storage-*`: Supabase Storage's endpoints at `/storage/v1`.
    pub storage: StorageSettings,
    /// `realtime-*`.
    pub realtime: RealtimeSettings,
    /// `dashboard-*`.
    pub dashboard: DashboardSettings,
    /// `backup-*`: the SQLite file's backups.
    pub backup: BackupSettings,
    /// `cache-*`: the response cache.
    pub cache: CacheSettings,
    /// `net-*`: the requests sent for the database (webhooks).
    pub net: NetSettings,
    /// `cron-*`: pg_cron's jobs.
    pub cron: CronSettings,
    /// `functions-*`: the Edge Functions at `/functions/v1`.
    pub functions: FunctionsSettings,
    /// `pocketbase`: PocketBase's API at `/api/`.
    pub pocketbase: PocketBaseSettings,
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
        let dashboard = DashboardSettings::from_args(&a, &file)?;
        let cache = CacheSettings::from_args(&a, &file)?;
        let openapi = OpenApiSettings::from_args(&a, &file)?;
        let api_keys = ApiKeySettings::from_args(&a, &file)?;
        let mut jwt = JwtSettings::from_args(&a, &file)?;
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
        let db = DbSettings::from_args(&a, &file)?;
        let sqlite_file = match &db.sqlite {
            Some(SqliteTarget::File(path)) => Some(path.as_path()),
            _ => None,
        };
        if let Some(path) = sqlite_file {
            jwt.default_for_file(path)?;
        }
        let backup = BackupSettings::from_args(&a, &file, sqlite_file)?;
        let net = NetSettings::from_args(&a.platform, &file.platform, db.sqlite.is_some())?;
        let cron = CronSettings::from_args(&a.platform, &file.platform, db.sqlite.is_some())?;
        let functions = FunctionsSettings::from_args(&a.platform, &file.platform)?;
        let (static_dir, static_prefix, api_prefix) = paths(
            a.static_dir.clone().or(file.static_dir.clone()),
            a.static_prefix.clone().or(file.static_prefix.clone()),
            a.api_prefix.clone().or(file.api_prefix.clone()),
        )?;
        let pocketbase =
            PocketBaseSettings::from_args(&a.platform, &file.platform, db.sqlite.is_some(), &api_prefix)?;
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
            db,
            openapi,
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
            accounts,
            storage,
            realtime,
            dashboard,
            backup,
            cache,
            net,
            cron,
            functions,
            pocketbase,
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

/// An option as the flags and variables give it (`a`), else as the file does (`f`).
fn either<T: Clone>(a: &Option<T>, f: &Option<T>) -> Option<T> {
    a.clone().or_else(|| f.clone())
}

/// Splits a PostgREST-style comma-separated list, trimming blanks.
fn list(value: &str) -> Vec<String> {
    value.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect()
}

#[cfg(test)]
mod tests;
