//! The options whose values are a choice among names.

use serde::Deserialize;

/// `log-level` values, PostgREST's names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    /// Only crashes.
    Crit,
    /// Errors (the default, as in PostgREST).
    Error,
    /// Warnings and errors.
    Warn,
    /// One line per request and lifecycle events.
    Info,
    /// Everything, including SQL.
    Debug,
}

impl LogLevel {
    /// The `tracing` filter directive for this level.
    pub fn directive(self) -> &'static str {
        match self {
            LogLevel::Crit | LogLevel::Error => "error",
            LogLevel::Warn => "warn",
            LogLevel::Info => "info",
            LogLevel::Debug => "debug",
        }
    }
}

/// `db-tx-end`: how a write's transaction ends, and whether `Prefer: tx=` may change it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TxEnd {
    /// Commit; `Prefer: tx=` is ignored (PostgREST's default).
    #[default]
    Commit,
    /// Commit unless the request asks `Prefer: tx=rollback`.
    CommitAllowOverride,
    /// Roll back; `Prefer: tx=` is ignored.
    Rollback,
    /// Roll back unless the request asks `Prefer: tx=commit`.
    RollbackAllowOverride,
}

/// `client-error-verbosity`: how much an error body says (PostgREST 16).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ErrorVerbosity {
    /// `code`, `message`, `details` and `hint`.
    #[default]
    Verbose,
    /// `code` and `message` only.
    Minimal,
}

/// `openapi-mode`: what the API root describes, as PostgREST's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OpenApiMode {
    /// What the caller's role may use (its grants; on SQLite, the access rules).
    #[default]
    FollowPrivileges,
    /// Everything in the schema, whoever asks.
    IgnorePrivileges,
    /// Nothing: the root answers 404 (PGRST126).
    Disabled,
}

/// `openapi-version`: the OpenAPI version the root answers `application/openapi+json`,
/// `application/json` and `*/*` with (`application/vnd.oai.openapi+json` always gets 3.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, Deserialize)]
pub enum OpenApiVersion {
    /// Swagger 2.0, as PostgREST.
    #[default]
    #[value(name = "2.0")]
    #[serde(rename = "2.0")]
    V2,
    /// OpenAPI 3.1.
    #[value(name = "3.1")]
    #[serde(rename = "3.1")]
    V31,
}
