//! PocketBase's error body, `{"status", "message", "data"}`, and the one place an error of its
//! API becomes a response.

use std::borrow::Cow;

use http::{header, HeaderValue, Response, StatusCode};
use serde_json::{json, Map, Value};

use crate::error::Error;
use crate::response::Body;

/// PocketBase's words for a request that needs a signed-in caller.
pub const UNAUTHORIZED: &str = "The request requires valid record authorization token.";

/// An error as PocketBase's API answers it.
#[derive(Debug)]
pub struct PbError {
    /// The status.
    pub status: StatusCode,
    /// PocketBase's words for it.
    pub message: Cow<'static, str>,
    /// Per-field errors (`{"title": {"code", "message"}}`), else empty.
    pub data: Map<String, Value>,
    /// What went wrong, for the log (PocketBase's answers do not say).
    pub cause: Box<str>,
}

impl PbError {
    fn new(status: StatusCode, message: impl Into<Cow<'static, str>>, cause: String) -> PbError {
        PbError { status, message: message.into(), data: Map::new(), cause: cause.into_boxed_str() }
    }

    /// An error of `status` with PocketBase's words for it.
    pub fn with_status(status: StatusCode, message: impl Into<Cow<'static, str>>, cause: String) -> PbError {
        PbError::new(status, message, cause)
    }

    /// 400 for a request PocketBase could not process (a filter, a sort, a parameter).
    pub fn bad_request(cause: impl Into<String>) -> PbError {
        PbError::new(
            StatusCode::BAD_REQUEST,
            "Something went wrong while processing your request.",
            cause.into(),
        )
    }

    /// 404.
    pub fn not_found() -> PbError {
        PbError::new(StatusCode::NOT_FOUND, "The requested resource wasn't found.", String::new())
    }

    /// 404 for a path no route takes (PocketBase's router hands those to its file server).
    pub fn no_route() -> PbError {
        PbError::new(StatusCode::NOT_FOUND, "File not found.", String::new())
    }

    /// 404 for a collection that does not exist.
    pub fn no_collection() -> PbError {
        PbError::new(StatusCode::NOT_FOUND, "Missing collection context.", String::new())
    }

    /// 401 for a request that needs a signed-in caller.
    pub fn unauthorized() -> PbError {
        PbError::new(StatusCode::UNAUTHORIZED, UNAUTHORIZED, String::new())
    }

    /// 403 with PocketBase's words.
    pub fn forbidden(message: &'static str) -> PbError {
        PbError::new(StatusCode::FORBIDDEN, message, String::new())
    }

    /// 400 for a create or update that was refused, with each field's reason.
    pub fn invalid(message: &'static str, data: Map<String, Value>) -> PbError {
        PbError { status: StatusCode::BAD_REQUEST, message: message.into(), data, cause: Box::default() }
    }

    /// `{"code", "message"}` of one field.
    pub fn field(code: &str, message: &str) -> Value {
        json!({ "code": code, "message": message })
    }

    /// An error of the backend's, as PocketBase would answer the request: `refused` when a rule
    /// or a constraint refuses a write (its words: "Failed to create record."), a missing rule
    /// as a superusers-only action, the server's own failures as they are.
    pub fn from_backend(e: Error, refused: Option<&'static str>) -> PbError {
        let status = e.to_response().status;
        match (e.code(), refused) {
            ("42501", Some(refused)) if e.to_string().contains("row-level security") => {
                PbError::new(StatusCode::BAD_REQUEST, refused, e.to_string())
            }
            ("42501", _) => {
                PbError::new(StatusCode::FORBIDDEN, "Only superusers can perform this action.", e.to_string())
            }
            (
                "23505" | "23502" | "23503" | "23514" | "22P02" | "22003" | "22007" | "22008",
                Some(refused),
            ) => PbError::new(StatusCode::BAD_REQUEST, refused, e.to_string()),
            _ if status.is_server_error() => {
                PbError::new(status, "Something went wrong while processing your request.", e.to_string())
            }
            _ => PbError::bad_request(e.to_string()),
        }
    }

    /// A request the planner refused (a field that is not there, a value of the wrong type).
    pub fn planned(e: Error) -> PbError {
        PbError::bad_request(e.to_string())
    }

    /// The response.
    pub fn response(&self) -> Response<Body> {
        if self.status.is_server_error() {
            tracing::error!(status = self.status.as_u16(), cause = %self.cause, "PocketBase API error");
        } else if !self.cause.is_empty() {
            tracing::debug!(status = self.status.as_u16(), cause = %self.cause, "PocketBase API error");
        }
        let body = json!({ "data": self.data, "message": self.message, "status": self.status.as_u16() });
        respond(self.status, &body)
    }
}

/// A JSON response.
pub fn respond(status: StatusCode, body: &Value) -> Response<Body> {
    let mut r = Response::new(Body::from(body.to_string()));
    *r.status_mut() = status;
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}
