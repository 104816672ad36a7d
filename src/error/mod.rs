//! The one `Error` type of a request, its codes, and the one mapping from an error to
//! PostgREST's error JSON and an HTTP status. A construction site names a code and says what
//! went wrong; the status belongs to the code ([`Code`]), never to the site.
//!
//! Codes follow PostgREST: `PGRST0xx` connection, `PGRST1xx` request, `PGRST2xx` schema cache,
//! `PGRST3xx` JWT, and PostgreSQL's SQLSTATE for database errors (statuses by
//! [`sqlstate_status`], PostgREST's table). Codes rowgate adds for what PostgREST does not have
//! start with `RG`.

use http::StatusCode;
use rowgate_request::RequestError;
use serde::Serialize;

/// An error code and the one HTTP status it is sent with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Code {
    name: &'static str,
    status: u16,
}

impl Code {
    const fn new(name: &'static str, status: u16) -> Code {
        Code { name, status }
    }

    /// The code as sent in the error body (`PGRST205`, `RG001`).
    pub fn name(self) -> &'static str {
        self.name
    }

    /// The HTTP status every error with this code is sent with.
    pub fn status(self) -> StatusCode {
        StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }
}

pub mod code;
pub mod disk;
pub mod sqlstate;

/// Everything that can go wrong while answering a request.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The request did not parse.
    #[error(transparent)]
    Request(#[from] RequestError),
    /// A name, media type or option the request uses is not acceptable, or a limit was hit.
    #[error("{message}")]
    Api {
        /// The code, which decides the status.
        code: Code,
        /// Message.
        message: String,
        /// Details, if any.
        details: Option<Details>,
        /// Hint, if any.
        hint: Option<String>,
    },
    /// The database refused the request's statement, or rowgate answers as PostgreSQL would.
    #[error("{}", .0.message)]
    Database(Box<DatabaseError>),
    /// SQL wrote the whole error response: `RAISE SQLSTATE 'PGRST'`.
    #[error("{}", .0.message)]
    Raised(Box<RaisedError>),
    /// No connection to the database could be made or used.
    #[error("database unavailable: {0}")]
    Unavailable(String),
    /// A column's type changed since the schema cache was loaded; a reload is on its way.
    #[error("the schema changed since the schema cache was loaded")]
    SchemaChanged,
    /// The bearer token does not decode or verify.
    #[error("{0}")]
    Jwt(String),
    /// The bearer token's signature verifies with none of the keys (or a key of another type).
    #[error("No suitable key or wrong key type")]
    JwtSignature,
    /// The bearer token verifies, but it has expired.
    #[error("JWT expired")]
    JwtExpired,
    /// The bearer token verifies, but its claims refuse it (expired, not yet valid, another
    /// audience, a time claim that is no number).
    #[error("{0}")]
    JwtClaims(String),
    /// No pooled connection became free within `db-pool-acquisition-timeout`.
    #[error("timed out acquiring a connection from the pool")]
    PoolTimeout,
    /// Beyond a rate limit: which one, and the seconds until a request would be admitted.
    #[error("rate limit of the {limit} reached")]
    RateLimited {
        /// `client address`, `API key` or `role`.
        limit: &'static str,
        /// Seconds to wait.
        retry_after: u64,
    },
}

/// An error with a SQLSTATE: PostgreSQL's own, or one rowgate raises in its place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatabaseError {
    /// The SQLSTATE.
    pub code: String,
    /// Message.
    pub message: String,
    /// Details, if any.
    pub details: Option<String>,
    /// Hint, if any.
    pub hint: Option<String>,
    /// Whether the caller was the anonymous role (a 42501 is then 401, not 403).
    pub anonymous: bool,
}

/// The error response a function raised with `RAISE SQLSTATE 'PGRST' USING MESSAGE = '{"code":
/// .., "message": .., "details": .., "hint": ..}', DETAIL = '{"status": .., "status_text": ..,
/// "headers": {..}}'`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RaisedError {
    /// The status of DETAIL's `status`.
    pub status: StatusCode,
    /// DETAIL's `status_text`: the reason phrase, in place of the standard one.
    pub reason: Option<String>,
    /// DETAIL's `headers`.
    pub headers: Vec<(String, String)>,
    /// The body's code.
    pub code: String,
    /// The body's message.
    pub message: String,
    /// The body's details.
    pub details: Option<String>,
    /// The body's hint.
    pub hint: Option<String>,
}

impl RaisedError {
    /// Reads MESSAGE and DETAIL of a `RAISE SQLSTATE 'PGRST'`; PGRST121 (500) when they are not
    /// the JSON objects PostgREST reads.
    fn parse(message: &str, detail: Option<&str>) -> Result<RaisedError, Error> {
        #[derive(serde::Deserialize)]
        struct Body {
            code: String,
            message: String,
            details: Option<String>,
            hint: Option<String>,
        }
        #[derive(serde::Deserialize)]
        struct Detail {
            status: u16,
            status_text: Option<String>,
            headers: std::collections::BTreeMap<String, String>,
        }
        const DETAIL_HINT: &str = "DETAIL must be a JSON object with obligatory keys: 'status', 'headers' \
                                   and optional key: 'status_text'.";
        let unparsable = |details: String, hint: &str| {
            Error::api(code::RAISE_PARSE, "Could not parse JSON in the \"RAISE SQLSTATE 'PGRST'\" error")
                .with_details(details)
                .with_hint(hint)
        };
        let body: Body = serde_json::from_str(message).map_err(|_| {
            unparsable(
                format!("Invalid JSON value for MESSAGE: '{message}'"),
                "MESSAGE must be a JSON object with obligatory keys: 'code', 'message' and optional keys: \
                 'details', 'hint'.",
            )
        })?;
        let detail = detail
            .ok_or_else(|| unparsable("DETAIL is missing in the RAISE statement".into(), DETAIL_HINT))?;
        let invalid_detail = || unparsable(format!("Invalid JSON value for DETAIL: '{detail}'"), DETAIL_HINT);
        let parsed: Detail = serde_json::from_str(detail).map_err(|_| invalid_detail())?;
        let status = StatusCode::from_u16(parsed.status).map_err(|_| invalid_detail())?;
        Ok(RaisedError {
            status,
            reason: parsed.status_text,
            headers: parsed.headers.into_iter().collect(),
            code: body.code,
            message: body.message,
            details: body.details,
            hint: body.hint,
        })
    }
}

/// An error's details: text, or (PGRST201's candidates) JSON.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Details {
    /// Text.
    Text(String),
    /// A JSON value (boxed: errors travel in every `Result`).
    Json(Box<serde_json::Value>),
}

impl From<String> for Details {
    fn from(text: String) -> Details {
        Details::Text(text)
    }
}

/// Details as they are written into a body.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum DetailsRef<'a> {
    /// Text.
    Text(&'a str),
    /// A JSON value.
    Json(&'a serde_json::Value),
}

impl<'a> From<&'a Details> for DetailsRef<'a> {
    fn from(details: &'a Details) -> DetailsRef<'a> {
        match details {
            Details::Text(t) => DetailsRef::Text(t),
            Details::Json(v) => DetailsRef::Json(v),
        }
    }
}

/// The JSON body PostgREST sends with every error.
#[derive(Debug, Serialize)]
pub struct ErrorBody<'a> {
    /// Error code.
    pub code: &'a str,
    /// Details, or null.
    pub details: Option<DetailsRef<'a>>,
    /// Hint, or null.
    pub hint: Option<&'a str>,
    /// Message.
    pub message: &'a str,
}

/// The body under `client-error-verbosity = minimal`.
#[derive(Debug, Serialize)]
pub struct MinimalErrorBody<'a> {
    /// Error code.
    pub code: &'a str,
    /// Message.
    pub message: &'a str,
}

/// An error ready to send: status, extra headers and body.
pub struct ErrorResponse {
    /// HTTP status.
    pub status: StatusCode,
    /// JSON body.
    pub body: String,
    /// `Retry-After` seconds, for 503s and 429s.
    pub retry_after: Option<u32>,
    /// Headers a raised error asks for (`RAISE SQLSTATE 'PGRST'`).
    pub headers: Vec<(String, String)>,
    /// A reason phrase in place of the status's own.
    pub reason: Option<String>,
    /// `WWW-Authenticate` value, for 401s.
    pub www_authenticate: Option<String>,
    /// The body's code (for `Proxy-Status`).
    pub code: String,
}

impl Error {
    /// An error with `code` and a message, without details or hint.
    pub fn api(code: Code, message: impl Into<String>) -> Self {
        Error::Api { code, message: message.into(), details: None, hint: None }
    }

    /// An error as PostgreSQL would raise it, with its SQLSTATE (see [`sqlstate`]).
    pub fn sql(sqlstate: &str, message: impl Into<String>, anonymous: bool) -> Self {
        Error::Database(Box::new(DatabaseError {
            code: sqlstate.to_owned(),
            message: message.into(),
            details: None,
            hint: None,
            anonymous,
        }))
    }

    /// A database error as the client sees it: a `RAISE SQLSTATE 'PGRST'` is the response its
    /// MESSAGE and DETAIL describe; any other keeps its SQLSTATE.
    pub fn database(db: DatabaseError) -> Self {
        if db.code == sqlstate::DISK_FULL {
            disk::refused("PostgreSQL", &db.message);
        }
        if db.code != "PGRST" {
            return Error::Database(Box::new(db));
        }
        match RaisedError::parse(&db.message, db.details.as_deref()) {
            Ok(raised) => Error::Raised(Box::new(raised)),
            Err(e) => e,
        }
    }

    /// The same error with `details`.
    pub fn with_details(mut self, text: impl Into<String>) -> Self {
        match &mut self {
            Error::Api { details, .. } => *details = Some(Details::Text(text.into())),
            Error::Database(db) => db.details = Some(text.into()),
            _ => {}
        }
        self
    }

    /// The same error with `hint`.
    pub fn with_hint(mut self, text: impl Into<String>) -> Self {
        match &mut self {
            Error::Api { hint, .. } => *hint = Some(text.into()),
            Error::Database(db) => db.hint = Some(text.into()),
            _ => {}
        }
        self
    }

    /// 503 RG008: `place` is out of room (counted and logged by [`disk::refused`]).
    pub fn disk_full(place: &str, detail: &dyn std::fmt::Display) -> Self {
        disk::refused(place, detail);
        Error::api(code::DISK_FULL, format!("The disk under {place} is full"))
            .with_hint("Writes resume once there is room again; deletes still work.")
    }

    /// Whether this is a full disk's refusal (rowgate's RG008 or PostgreSQL's 53100).
    pub fn is_disk_full(&self) -> bool {
        match self {
            Error::Api { code, .. } => *code == code::DISK_FULL,
            Error::Database(db) => db.code == sqlstate::DISK_FULL,
            _ => false,
        }
    }

    /// 500 for a failure on rowgate's side; `message` is for the log and the client alike.
    pub fn internal(message: impl Into<String>) -> Self {
        Error::api(code::INTERNAL, message)
    }

    /// A copy of an error shared between waiters (a coalesced look-up's failure). Database
    /// errors keep their SQLSTATE; anything else becomes what it means to the caller.
    pub fn duplicate(&self) -> Error {
        match self {
            Error::Api { code, message, details, hint } => Error::Api {
                code: *code,
                message: message.clone(),
                details: details.clone(),
                hint: hint.clone(),
            },
            Error::Database(db) => Error::Database(db.clone()),
            Error::Raised(raised) => Error::Raised(raised.clone()),
            Error::PoolTimeout => Error::PoolTimeout,
            Error::RateLimited { limit, retry_after } => {
                Error::RateLimited { limit, retry_after: *retry_after }
            }
            other => Error::Unavailable(other.to_string()),
        }
    }

    /// 400 PGRST124: a write touched more rows than `Prefer: max-affected` allows.
    pub fn max_affected(affected: u64) -> Self {
        Error::api(code::MAX_AFFECTED, "Query result exceeds max-affected preference constraint")
            .with_details(format!("The query affects {affected} rows"))
    }

    /// The code this error is sent with.
    pub fn code(&self) -> &str {
        match self {
            Error::Request(e) => request_code(e).name(),
            Error::Api { code, .. } => code.name(),
            Error::Database(db) => &db.code,
            Error::Raised(raised) => &raised.code,
            Error::Unavailable(_) => code::CONNECTION.name(),
            Error::SchemaChanged => code::SCHEMA_CACHE_NOT_READY.name(),
            Error::Jwt(_) | Error::JwtSignature => code::JWT_INVALID.name(),
            Error::JwtClaims(_) | Error::JwtExpired => code::JWT_CLAIMS.name(),
            Error::PoolTimeout => code::POOL_TIMEOUT.name(),
            Error::RateLimited { .. } => code::RATE_LIMITED.name(),
        }
    }

    /// Builds the response: the single mapping from errors to HTTP.
    pub fn to_response(&self) -> ErrorResponse {
        self.to_response_as(false)
    }

    /// [`Error::to_response`], the body without `details` and `hint` when `minimal`
    /// (`client-error-verbosity`).
    pub fn to_response_as(&self, minimal: bool) -> ErrorResponse {
        let mut retry_after = None;
        let mut www_authenticate = None;
        let mut headers = Vec::new();
        let mut reason = None;
        let owned_message: String;
        let (status, code, message, details, hint): (
            StatusCode,
            &str,
            &str,
            Option<DetailsRef>,
            Option<&str>,
        ) = match self {
            Error::Request(e) => {
                let code = request_code(e);
                let (message, details) = match e {
                    RequestError::Parse { message, details } => {
                        (message.as_str(), Some(DetailsRef::Text(details)))
                    }
                    RequestError::InvalidRange { details } => {
                        ("Requested range not satisfiable", Some(DetailsRef::Text(details)))
                    }
                    RequestError::InvalidBody(m) => (m.as_str(), None),
                    RequestError::NotFound => ("Invalid path specified in request URL", None),
                };
                (code.status(), code.name(), message, details, None)
            }
            Error::Api { code, message, details, hint } => {
                (code.status(), code.name(), message, details.as_ref().map(DetailsRef::from), hint.as_deref())
            }
            Error::Database(db) => (
                sqlstate_status(&db.code, &db.message, db.anonymous),
                db.code.as_str(),
                db.message.as_str(),
                db.details.as_deref().map(DetailsRef::Text),
                db.hint.as_deref(),
            ),
            Error::Raised(raised) => {
                headers.clone_from(&raised.headers);
                reason.clone_from(&raised.reason);
                (
                    raised.status,
                    raised.code.as_str(),
                    raised.message.as_str(),
                    raised.details.as_deref().map(DetailsRef::Text),
                    raised.hint.as_deref(),
                )
            }
            Error::Unavailable(_) => {
                retry_after = Some(5);
                let c = code::CONNECTION;
                (c.status(), c.name(), "Database client error. Retrying the connection.", None, None)
            }
            Error::Jwt(_) | Error::JwtClaims(_) | Error::JwtSignature | Error::JwtExpired => {
                let message = match self {
                    Error::Jwt(m) | Error::JwtClaims(m) => m.as_str(),
                    Error::JwtSignature => "No suitable key or wrong key type",
                    _ => "JWT expired",
                };
                www_authenticate = Some(format!(
                    "Bearer error=\"invalid_token\", error_description=\"{}\"",
                    message.replace('\\', "\\\\").replace('"', "\\\"")
                ));
                let c = if matches!(self, Error::Jwt(_) | Error::JwtSignature) {
                    code::JWT_INVALID
                } else {
                    code::JWT_CLAIMS
                };
                (c.status(), c.name(), message, None, None)
            }
            Error::SchemaChanged => {
                retry_after = Some(1);
                let c = code::SCHEMA_CACHE_NOT_READY;
                let message = "The schema changed since the schema cache was loaded. Reloading it; retry.";
                (c.status(), c.name(), message, None, None)
            }
            Error::PoolTimeout => {
                let c = code::POOL_TIMEOUT;
                (c.status(), c.name(), "Timed out acquiring connection from connection pool.", None, None)
            }
            Error::RateLimited { limit, retry_after: wait } => {
                retry_after = Some(u32::try_from(*wait).unwrap_or(u32::MAX));
                let c = code::RATE_LIMITED;
                owned_message = format!("Too many requests from this {limit}: retry in {wait} s");
                (c.status(), c.name(), owned_message.as_str(), None, None)
            }
        };
        if self.is_disk_full() {
            retry_after = Some(disk::RETRY_AFTER);
        }
        let body = match minimal {
            true => serde_json::to_string(&MinimalErrorBody { code, message }),
            false => serde_json::to_string(&ErrorBody { code, details, hint, message }),
        };
        ErrorResponse {
            status,
            code: code.to_owned(),
            body: body.unwrap_or_default(),
            retry_after,
            headers,
            reason,
            www_authenticate: www_authenticate
                .or_else(|| (status == StatusCode::UNAUTHORIZED).then(|| "Bearer".to_owned())),
        }
    }
}

/// The code of a request the parser refused.
fn request_code(e: &RequestError) -> Code {
    match e {
        RequestError::Parse { .. } => code::PARSE,
        RequestError::InvalidRange { .. } => code::INVALID_RANGE,
        RequestError::InvalidBody(_) => code::INVALID_BODY,
        RequestError::NotFound => code::INVALID_PATH,
    }
}

/// Maps a PostgreSQL SQLSTATE to an HTTP status as PostgREST does (`mapSQLtoHTTP`): class
/// prefixes first, then exact codes.
pub fn sqlstate_status(sqlstate: &str, message: &str, anonymous: bool) -> StatusCode {
    let class = sqlstate.get(..2).unwrap_or("");
    match (class, sqlstate) {
        ("08", _) => StatusCode::SERVICE_UNAVAILABLE,
        ("09", _) => StatusCode::INTERNAL_SERVER_ERROR,
        ("0L", _) | ("0P", _) | ("28", _) => StatusCode::FORBIDDEN,
        // pg-safeupdate's refusal is the client's mistake; any other cardinality violation
        // (a subquery returning several rows) is the server's.
        ("21", "21000") if message.ends_with("requires a WHERE clause") => StatusCode::BAD_REQUEST,
        ("21", "21000") => StatusCode::INTERNAL_SERVER_ERROR,
        // A token's role that does not exist (PostgREST 13.0.1).
        ("22", "22023") if message.starts_with("role") && message.ends_with("does not exist") => {
            StatusCode::UNAUTHORIZED
        }
        ("25", "25006") => StatusCode::METHOD_NOT_ALLOWED,
        ("25", _) => StatusCode::INTERNAL_SERVER_ERROR,
        ("2D", _) | ("38", _) | ("39", _) | ("3B", _) => StatusCode::INTERNAL_SERVER_ERROR,
        ("40", _) => StatusCode::INTERNAL_SERVER_ERROR,
        ("53", "53400") => StatusCode::INTERNAL_SERVER_ERROR,
        // The server is shutting down or restarting: the request may succeed on retry.
        ("57", "57P01") | ("57", "57P02") | ("57", "57P03") => StatusCode::SERVICE_UNAVAILABLE,
        ("53", _) => StatusCode::SERVICE_UNAVAILABLE,
        (_, "P0001") => StatusCode::BAD_REQUEST,
        ("54", _) | ("55", _) | ("57", _) | ("58", _) | ("F0", _) | ("HV", _) | ("P0", _) => {
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
        // `RAISE sqlstate 'PT402'` sets the status; a PT code that is no status is 500.
        ("PT", _) => custom_status(sqlstate).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        _ => StatusCode::BAD_REQUEST,
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
            assert_eq!(sqlstate_status(state, "", anon).as_u16(), status, "{state}");
        }
    }

    #[test]
    fn a_code_is_sent_with_its_one_status() {
        let r = Error::api(code::UNSUPPORTED, "A cast to money is not supported").to_response();
        assert_eq!((r.status.as_u16(), r.body.contains("\"RG501\"")), (400, true));
        let r = Error::api(code::BODY_TOO_LARGE, "too large").to_response();
        assert_eq!(r.status.as_u16(), 413);
        let r = Error::api(code::BODY_UNREADABLE, "broken").to_response();
        assert_eq!(r.status.as_u16(), 400);
    }
}
