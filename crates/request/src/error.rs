//! Errors of the request stage: PostgREST's group 1 (`PGRST1xx`).

/// A request that cannot be parsed. Each variant maps to one PostgREST error code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// PGRST100: a query parameter did not parse. `message` is PostgREST's
    /// `"failed to parse <what> (<input>)" (line 1, column N)` and `details` the parser's
    /// explanation (`unexpected "x" expecting ...`).
    #[error("{message}")]
    Parse {
        /// PostgREST's message.
        message: String,
        /// PostgREST's details.
        details: String,
    },
    /// PGRST103: the `Range` header or `limit`/`offset` cannot be satisfied.
    #[error("Requested range not satisfiable")]
    InvalidRange {
        /// PostgREST's details text.
        details: String,
    },
    /// Plain 404 with an empty body (PostgREST's `NotFound`, no PGRST code): the path is
    /// neither `/`, `/{relation}` nor `/rpc/{function}`, e.g. `/a/b` or `/items/`.
    #[error("Not Found")]
    NotFound,
    /// PGRST102: an invalid body (unused by reads; kept for writes).
    #[error("{0}")]
    InvalidBody(String),
}
