//! Supabase Storage's errors, as its server sends them: mostly HTTP 400, with the status meant
//! in the body as a string (`{"statusCode":"404","error":"Bucket not found","message":...,
//! "code":"NoSuchBucket"}`); storage-js reads `statusCode` and `message`. Each kind has one
//! shape, built here.

use http::{header, HeaderValue, Response, StatusCode};

use crate::response::Body;

/// A storage error, ready to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageError {
    /// The HTTP status (400 unless the kind says otherwise).
    pub http: StatusCode,
    /// `statusCode`: the status meant.
    pub status_code: &'static str,
    /// `error`.
    pub error: &'static str,
    /// `code`.
    pub code: &'static str,
    /// `message`.
    pub message: String,
    /// `Retry-After` seconds, when waiting may help.
    pub retry_after: Option<u32>,
}

impl StorageError {
    fn new(
        status_code: &'static str,
        error: &'static str,
        code: &'static str,
        message: impl Into<String>,
    ) -> Self {
        StorageError {
            http: StatusCode::BAD_REQUEST,
            status_code,
            error,
            code,
            message: message.into(),
            retry_after: None,
        }
    }

    /// The same error sent with `http` instead of 400.
    fn with_http(mut self, http: StatusCode) -> Self {
        self.http = http;
        self
    }

    /// No such bucket, or one the caller may not see (or not public, on a public route).
    pub fn no_such_bucket() -> Self {
        Self::new("404", "Bucket not found", "NoSuchBucket", "Bucket not found")
    }

    /// No such object, or one the caller may not see.
    pub fn no_such_key() -> Self {
        Self::new("404", "not_found", "NoSuchKey", "Object not found")
    }

    /// The row is there but its bytes are not.
    pub fn bytes_missing() -> Self {
        Self::new("404", "Not found", "NoSuchKey", "The resource was not found")
    }

    /// An object that exists already (an upload without upsert).
    pub fn key_exists() -> Self {
        Self::new("409", "Duplicate", "KeyAlreadyExists", "The resource already exists")
    }

    /// Another unique key taken (a move's or copy's destination).
    pub fn resource_exists() -> Self {
        Self::new("409", "Duplicate", "ResourceAlreadyExists", "The resource already exists")
    }

    /// A bucket whose id or name is taken.
    pub fn bucket_exists() -> Self {
        Self::new("409", "Duplicate", "BucketAlreadyExists", "The resource already exists")
    }

    /// A bucket deleted while it holds objects.
    pub fn bucket_not_empty() -> Self {
        Self::new(
            "409",
            "ResourceNotEmpty",
            "ResourceNotEmpty",
            "The bucket you tried to delete is not empty",
        )
    }

    /// An object name outside Supabase's characters, or with `.`/`..` segments.
    pub fn invalid_key(key: &str) -> Self {
        Self::new("400", "InvalidKey", "InvalidKey", format!("Invalid key: {key}"))
    }

    /// A bucket name outside Supabase's characters or lengths.
    pub fn invalid_bucket_name() -> Self {
        Self::new("400", "Invalid Input", "InvalidBucketName", "Bucket name invalid")
    }

    /// Larger than the bucket's or the server's limit.
    pub fn too_large() -> Self {
        Self::new(
            "413",
            "Payload too large",
            "EntityTooLarge",
            "The object exceeded the maximum allowed size",
        )
    }

    /// A media type the bucket does not allow, or one that is malformed.
    pub fn mime_not_allowed(mime: &str) -> Self {
        Self::new("415", "invalid_mime_type", "InvalidMimeType", format!("mime type {mime} is not supported"))
    }

    /// Refused by row-level security or the access rules, or by a table grant.
    pub fn access_denied(message: impl Into<String>) -> Self {
        Self::new("403", "Unauthorized", "AccessDenied", message)
    }

    /// A request the route cannot take: a missing field, a malformed body.
    pub fn invalid_request(message: impl Into<String>) -> Self {
        Self::new("400", "Error", "InvalidRequest", message)
    }

    /// A parameter out of its range.
    pub fn invalid_parameter(name: &str) -> Self {
        Self::new("400", "InvalidParameter", "InvalidParameter", format!("Invalid Parameter {name}"))
    }

    /// A signed URL's token that does not verify or has expired.
    pub fn invalid_jwt(message: impl Into<String>) -> Self {
        Self::new("400", "InvalidJWT", "InvalidJWT", message)
    }

    /// A signed URL's token for another object, or of another kind.
    pub fn invalid_signature(message: impl Into<String>) -> Self {
        Self::new("400", "InvalidSignature", "InvalidSignature", message)
    }

    /// A `Range` that cannot be satisfied (HTTP 416).
    pub fn invalid_range() -> Self {
        Self::new("416", "invalid_range", "InvalidRange", "invalid range provided")
            .with_http(StatusCode::RANGE_NOT_SATISFIABLE)
    }

    /// An unknown route (HTTP 404).
    pub fn no_route(method: &http::Method, path: &str) -> Self {
        Self::new("404", "Not Found", "InvalidRequest", format!("Route {method}:{path} not found"))
            .with_http(StatusCode::NOT_FOUND)
    }

    /// The database took too long (HTTP 544, as Supabase's).
    pub fn database_timeout() -> Self {
        Self::new("544", "DatabaseTimeout", "DatabaseTimeout", "The connection to the database timed out")
            .with_http(StatusCode::from_u16(544).unwrap_or(StatusCode::GATEWAY_TIMEOUT))
    }

    /// The database cannot be reached (HTTP 503).
    pub fn unavailable() -> Self {
        Self::new("503", "DatabaseUnavailable", "DatabaseError", "The database is not available")
            .with_http(StatusCode::SERVICE_UNAVAILABLE)
    }

    /// No room for the bytes in `storage-dir` or the bucket, or for the row in the database
    /// (HTTP 503 with `Retry-After`, as every surface answers a full disk).
    pub fn disk_full() -> Self {
        let mut e = Self::new(
            "503",
            "Insufficient Storage",
            "InsufficientStorage",
            "The disk is full: uploads resume once there is room again; deletes still work",
        )
        .with_http(StatusCode::SERVICE_UNAVAILABLE);
        e.retry_after = Some(crate::error::disk::RETRY_AFTER);
        e
    }

    /// The bytes could not be written: a full disk (503, counted), or the store failed (500,
    /// logged).
    pub fn bytes_unwritable(e: &std::io::Error) -> Self {
        if e.kind() == std::io::ErrorKind::StorageFull {
            crate::error::disk::refused("storage", e);
            return Self::disk_full();
        }
        tracing::error!(error = %e, "storage: an upload's bytes could not be stored");
        Self::internal("The upload could not be stored")
    }

    /// Whether this is a full disk's refusal.
    pub fn is_disk_full(&self) -> bool {
        self.code == "InsufficientStorage"
    }

    /// Too many transforms waiting already (S3's and Supabase's `SlowDown`).
    pub fn busy() -> Self {
        Self::new(
            "503",
            "Slow Down",
            "SlowDown",
            "Too many image transformations are waiting: try again shortly",
        )
        .with_http(StatusCode::SERVICE_UNAVAILABLE)
    }

    /// A transform's source that is no image, or a broken one (imgproxy's 422, passed on).
    pub fn image_invalid() -> Self {
        Self::new("422", "ImageProcessingError", "InvalidImage", "Invalid source image")
            .with_http(StatusCode::UNPROCESSABLE_ENTITY)
    }

    /// A transform's source past the byte or pixel budget.
    pub fn image_too_big() -> Self {
        Self::new("422", "ImageProcessingError", "InvalidImage", "Source image resolution is too big")
            .with_http(StatusCode::UNPROCESSABLE_ENTITY)
    }

    /// A failure on rowgate's side (HTTP 500).
    /// The stored bytes could not be reached: missing (404), no room for a copy (503), or the
    /// store failed (500, logged).
    pub fn bytes_unreadable(e: std::io::Error) -> Self {
        match e.kind() {
            std::io::ErrorKind::NotFound => return Self::bytes_missing(),
            // A copy's new bytes found no room.
            std::io::ErrorKind::StorageFull => return Self::bytes_unwritable(&e),
            _ => {}
        }
        tracing::error!(error = %e, "storage: stored bytes could not be read");
        Self::internal("The stored bytes could not be read")
    }

    /// Beyond a rate limit of the caller's (its key's or role's).
    pub fn too_many_requests(message: impl Into<String>) -> Self {
        Self::new("429", "Too Many Requests", "TooManyRequests", message)
            .with_http(StatusCode::TOO_MANY_REQUESTS)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new("500", "internal", "InternalError", message).with_http(StatusCode::INTERNAL_SERVER_ERROR)
    }

    /// The response.
    pub fn to_response(&self) -> Response<Body> {
        let body = serde_json::json!({
            "statusCode": self.status_code,
            "code": self.code,
            "error": self.error,
            "message": self.message,
        });
        let mut r = Response::new(Body::from(body.to_string()));
        *r.status_mut() = self.http;
        r.headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json; charset=utf-8"));
        if let Some(secs) = self.retry_after {
            r.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        r
    }
}

/// What a database error means to a storage client: a refusal by row-level security (or a
/// grant) is 403 AccessDenied; a statement timeout 544; the database gone 503; anything else is
/// rowgate's failure.
pub fn from_api(e: &crate::error::Error) -> StorageError {
    use crate::error::Error;
    match e {
        Error::Database(db) if db.code == "42501" => {
            let message = match db.message.contains("row-level security") {
                true => "new row violates row-level security policy".to_owned(),
                false => db.message.clone(),
            };
            StorageError::access_denied(message)
        }
        Error::Database(db) if db.code == "57014" => StorageError::database_timeout(),
        Error::Database(db) if db.code == "23505" => StorageError::resource_exists(),
        Error::Unavailable(_) | Error::PoolTimeout => StorageError::unavailable(),
        _ if e.is_disk_full() => StorageError::disk_full(),
        // Refused before anything ran: an API key missing or not valid, a rate limit.
        Error::Api { .. } if matches!(e.to_response().status.as_u16(), 401 | 403) => {
            StorageError::access_denied(e.to_string())
        }
        Error::RateLimited { .. } => StorageError::too_many_requests(e.to_string()),
        other => {
            // What failed is the operator's to read, in the log; the client learns nothing of
            // the database from it.
            tracing::error!(error = %other, "a storage statement failed");
            StorageError::internal("Internal Server Error")
        }
    }
}
