//! The one `Error` type of a request, and its mapping to PostgREST's error JSON and HTTP
//! status. This file is the only place where an error becomes a status code.
//!
//! Codes follow PostgREST: `PGRST0xx` connection, `PGRST1xx` request, `PGRST2xx` schema cache,
//! `PGRST3xx` JWT, and PostgreSQL's SQLSTATE for database errors. Codes rowgate adds for limits
//! PostgREST does not have start with `RG`.

use http::StatusCode;
use rowgate_request::RequestError;
use serde::Serialize;

/// PostgREST's error codes that rowgate emits, by name.
pub mod code {
    /// Could not connect to the database.
    pub const CONNECTION: &str = "PGRST000";
    /// Internal connection error.
    pub const CONNECTION_INTERNAL: &str = "PGRST001";
    /// The schema cache is not loaded yet.
    pub const SCHEMA_CACHE_NOT_READY: &str = "PGRST002";
    /// Timed out waiting for a pooled connection.
    pub const POOL_TIMEOUT: &str = "PGRST003";
    /// A query parameter did not parse.
    pub const PARSE: &str = "PGRST100";
    /// Invalid `Range` or offset.
    pub const INVALID_RANGE: &str = "PGRST103";
    /// Unknown schema in `Accept-Profile` / `Content-Profile`.
    pub const UNACCEPTABLE_SCHEMA: &str = "PGRST106";
    /// No acceptable media type.
    pub const UNACCEPTABLE_MEDIA: &str = "PGRST107";
    /// `vnd.pgrst.object+json` with a row count other than one.
    pub const SINGULAR: &str = "PGRST116";
    /// Unsupported method for the target.
    pub const UNSUPPORTED_METHOD: &str = "PGRST117";
    /// `handling=strict` with an invalid preference.
    pub const INVALID_PREFERENCES: &str = "PGRST122";
    /// Unknown table or view.
    pub const RELATION_NOT_FOUND: &str = "PGRST205";
    /// No `db-anon-role` and no credentials.
    pub const NO_ANON_ROLE: &str = "PGRST302";
    /// URL longer than `server-max-url-length`.
    pub const URL_TOO_LONG: &str = "RG001";
    /// Body larger than `server-max-body-size`.
    pub const BODY_TOO_LARGE: &str = "RG002";
    /// A request handler panicked (a bug); the server keeps running.
    pub const INTERNAL: &str = "RG500";
    /// A PATCH or DELETE without filters under `db-safe-updates`.
    pub const UNSAFE_UPDATE: &str = "RG020";
    /// `Prefer: patch=by-key` with an object that lacks the primary key.
    pub const PATCH_BY_KEY: &str = "RG021";
    /// A nested insert that cannot be one (an upsert, or no primary key).
    pub const NESTED_INSERT: &str = "RG022";
    /// More rows affected than `Prefer: max-affected` allows.
    pub const MAX_AFFECTED: &str = "PGRST124";
    /// A feature that this version of rowgate does not implement yet.
    pub const NOT_IMPLEMENTED: &str = "RG501";
}

/// Everything that can go wrong while answering a request.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The request did not parse.
    #[error(transparent)]
    Request(#[from] RequestError),
    /// A name, media type or option the request uses is not acceptable.
    #[error("{message}")]
    Api {
        /// HTTP status.
        status: StatusCode,
        /// PostgREST (or rowgate) code.
        code: &'static str,
        /// Message.
        message: String,
        /// Details, if any.
        details: Option<String>,
        /// Hint, if any.
        hint: Option<String>,
    },
    /// PostgreSQL returned an error for the request's statement.
    #[error("{}", .0.message())]
    Database(Box<tokio_postgres::error::DbError>, /* anonymous caller */ bool),
    /// No connection to PostgreSQL could be made or used.
    #[error("database unavailable: {0}")]
    Unavailable(String),
    /// A column's type changed since the schema cache was loaded; a reload is on its way.
    #[error("the schema changed since the schema cache was loaded")]
    SchemaChanged,
    /// The bearer token is invalid, expired or not for us (PGRST301).
    #[error("{0}")]
    Jwt(String),
    /// No pooled connection became free within `db-pool-acquisition-timeout`.
    #[error("timed out acquiring a connection from the pool")]
    PoolTimeout,
}

/// The JSON body PostgREST sends with every error.
#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct ErrorBody<'a> {
    /// Error code.
    pub code: &'a str,
    /// Details, or null.
    pub details: Option<&'a str>,
    /// Hint, or null.
    pub hint: Option<&'a str>,
    /// Message.
    pub message: &'a str,
}

/// An error ready to send: status, extra headers and body.
pub struct ErrorResponse {
    /// HTTP status.
    pub status: StatusCode,
    /// JSON body.
    pub body: String,
    /// `Retry-After` seconds, for 503s.
    pub retry_after: Option<u32>,
    /// `WWW-Authenticate` value, for 401s.
    pub www_authenticate: Option<String>,
}

impl Error {
    /// A copy of an error shared between waiters (a coalesced look-up's failure). Database
    /// errors keep their SQLSTATE; anything else becomes what it means to the caller.
    pub fn duplicate(&self) -> Error {
        match self {
            Error::Api { status, code, message, details, hint } => Error::Api {
                status: *status,
                code,
                message: message.clone(),
                details: details.clone(),
                hint: hint.clone(),
            },
            Error::Database(db, anonymous) => Error::Database(db.clone(), *anonymous),
            Error::PoolTimeout => Error::PoolTimeout,
            other => Error::Unavailable(other.to_string()),
        }
    }

    /// 400 PGRST124: a write touched more rows than `Prefer: max-affected` allows.
    pub fn max_affected(affected: u64) -> Self {
        Error::Api {
            status: StatusCode::BAD_REQUEST,
            code: code::MAX_AFFECTED,
            message: "Query result exceeds max-affected preference constraint".into(),
            details: Some(format!("The query affects {affected} rows")),
            hint: None,
        }
    }

    /// Shorthand for an API error without details or hint.
    pub fn api(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Error::Api { status, code, message: message.into(), details: None, hint: None }
    }

    /// Builds the response: the single mapping from errors to HTTP.
    pub fn to_response(&self) -> ErrorResponse {
        let mut retry_after = None;
        let mut www_authenticate = None;
        let (status, code, message, details, hint): (StatusCode, &str, &str, Option<&str>, Option<&str>) =
            match self {
                Error::Request(e) => match e {
                    RequestError::Parse { message, details } => {
                        (StatusCode::BAD_REQUEST, code::PARSE, message, Some(details), None)
                    }
                    RequestError::InvalidRange { details } => (
                        StatusCode::RANGE_NOT_SATISFIABLE,
                        code::INVALID_RANGE,
                        "Requested range not satisfiable",
                        Some(details),
                        None,
                    ),
                    RequestError::InvalidBody(m) => {
                        (StatusCode::BAD_REQUEST, "PGRST102", m.as_str(), None, None)
                    }
                    RequestError::NotFound => (
                        StatusCode::NOT_FOUND,
                        "PGRST125",
                        "Invalid path specified in request URL",
                        None,
                        None,
                    ),
                },
                Error::Api { status, code, message, details, hint } => {
                    (*status, code, message, details.as_deref(), hint.as_deref())
                }
                Error::Database(db, anonymous) => {
                    let status = sqlstate_status(db.code().code(), *anonymous);
                    (status, db.code().code(), db.message(), db.detail(), db.hint())
                }
                Error::Unavailable(_) => {
                    retry_after = Some(5);
                    (
                        StatusCode::SERVICE_UNAVAILABLE,
                        code::CONNECTION,
                        "Database client error. Retrying the connection.",
                        None,
                        None,
                    )
                }
                Error::Jwt(message) => {
                    www_authenticate = Some(format!(
                        "Bearer error=\"invalid_token\", error_description=\"{}\"",
                        message.replace('\\', "\\\\").replace('"', "\\\"")
                    ));
                    (StatusCode::UNAUTHORIZED, "PGRST301", message.as_str(), None, None)
                }
                Error::SchemaChanged => {
                    retry_after = Some(1);
                    (
                        StatusCode::SERVICE_UNAVAILABLE,
                        code::SCHEMA_CACHE_NOT_READY,
                        "The schema changed since the schema cache was loaded. Reloading it; retry.",
                        None,
                        None,
                    )
                }
                Error::PoolTimeout => (
                    StatusCode::GATEWAY_TIMEOUT,
                    code::POOL_TIMEOUT,
                    "Timed out acquiring connection from connection pool.",
                    None,
                    None,
                ),
            };
        let body = ErrorBody { code, details, hint, message };
        ErrorResponse {
            status,
            body: serde_json::to_string(&body).unwrap_or_default(),
            retry_after,
            www_authenticate: www_authenticate
                .or_else(|| (status == StatusCode::UNAUTHORIZED).then(|| "Bearer".to_owned())),
        }
    }
}

/// Maps a PostgreSQL SQLSTATE to an HTTP status as PostgREST does (`mapSQLtoHTTP`): class
/// prefixes first, then exact codes.
pub fn sqlstate_status(sqlstate: &str, anonymous: bool) -> StatusCode {
    let class = sqlstate.get(..2).unwrap_or("");
    match (class, sqlstate) {
        ("08", _) => StatusCode::SERVICE_UNAVAILABLE,
        ("09", _) | ("0L", _) | ("0P", _) | ("28", _) => StatusCode::FORBIDDEN,
        ("25", "25006") => StatusCode::METHOD_NOT_ALLOWED,
        ("25", _) => StatusCode::INTERNAL_SERVER_ERROR,
        ("2D", _) | ("38", _) | ("39", _) | ("3B", _) => StatusCode::INTERNAL_SERVER_ERROR,
        ("40", _) => StatusCode::INTERNAL_SERVER_ERROR,
        ("53", "53400") => StatusCode::INTERNAL_SERVER_ERROR,
        // The server is shutting down or restarting: the request may succeed on retry.
        ("57", "57P01") | ("57", "57P02") | ("57", "57P03") => StatusCode::SERVICE_UNAVAILABLE,
        ("53", _) => StatusCode::SERVICE_UNAVAILABLE,
        ("54", _) | ("55", _) | ("57", _) | ("58", _) | ("F0", _) | ("HV", _) | ("P0", "P0000") => {
            StatusCode::INTERNAL_SERVER_ERROR
        }
        ("XX", _) => StatusCode::INTERNAL_SERVER_ERROR,
        (_, "23503") | (_, "23505") => StatusCode::CONFLICT,
        (_, "42883") | (_, "42P01") => StatusCode::NOT_FOUND,
        (_, "42P17") => StatusCode::INTERNAL_SERVER_ERROR,
        (_, "42501") => {
            if anonymous {
                StatusCode::UNAUTHORIZED
            } else {
                StatusCode::FORBIDDEN
            }
        }
        (_, "P0001") => StatusCode::BAD_REQUEST,
        _ => custom_status(sqlstate).unwrap_or(StatusCode::BAD_REQUEST),
    }
}

/// `RAISE sqlstate 'PT402'` sets the HTTP status to 402, as in PostgREST.
fn custom_status(sqlstate: &str) -> Option<StatusCode> {
    let digits = sqlstate.strip_prefix("PT")?;
    StatusCode::from_u16(digits.parse().ok()?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlstates_map_like_postgrest() {
        let cases = [
            ("08006", true, 503),
            ("23505", false, 409),
            ("23503", false, 409),
            ("25006", false, 405),
            ("28000", false, 403),
            ("42501", true, 401),
            ("42501", false, 403),
            ("42883", false, 404),
            ("42P01", false, 404),
            ("42703", false, 400),
            ("22P02", false, 400),
            ("53400", false, 500),
            ("53300", false, 503),
            ("57014", false, 500),
            ("P0001", false, 400),
            ("PT402", false, 402),
            ("XX000", false, 500),
        ];
        for (state, anon, status) in cases {
            assert_eq!(sqlstate_status(state, anon).as_u16(), status, "{state}");
        }
    }
}
