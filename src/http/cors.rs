//! CORS as PostgREST does it: any origin by default (`Access-Control-Allow-Origin: *`), or only
//! the origins of `server-cors-allowed-origins` (echoed, with credentials allowed). Preflight
//! requests are answered here, without touching the database.

use http::{header, HeaderMap, HeaderValue, Method, Request, Response, StatusCode};

use super::Body;

/// Methods a preflight allows.
const METHODS: &str = "GET, POST, PATCH, PUT, DELETE, OPTIONS, HEAD";
/// Response headers a browser script may read.
const EXPOSED: &str = "Content-Encoding, Content-Location, Content-Range, Content-Type, Date, Location, \
                       Server, Transfer-Encoding, Range-Unit, Content-Profile, Preference-Applied, \
                       Retry-After, WWW-Authenticate, X-Rowgate-Lsn";
/// How long a browser may cache a preflight answer (PostgREST's one day).
const MAX_AGE: &str = "86400";

/// The CORS policy.
pub struct Cors {
    allowed: Option<Vec<String>>,
}

impl Cors {
    /// Any origin when `allowed` is `None`, else only those listed.
    pub fn new(allowed: Option<Vec<String>>) -> Cors {
        Cors { allowed }
    }

    /// `Access-Control-Allow-Origin` for this origin, if it is allowed.
    fn allow(&self, origin: &HeaderValue) -> Option<HeaderValue> {
        match &self.allowed {
            None => Some(HeaderValue::from_static("*")),
            Some(list) => {
                let o = origin.to_str().ok()?;
                list.iter().any(|a| a == o).then(|| origin.clone())
            }
        }
    }

    /// The answer to a preflight request (`OPTIONS` with `Origin` and
    /// `Access-Control-Request-Method`), or `None` for any other request.
    pub fn preflight<B>(&self, req: &Request<B>) -> Option<Response<Body>> {
        if req.method() != Method::OPTIONS {
            return None;
        }
        let origin = req.headers().get(header::ORIGIN)?;
        req.headers().get(header::ACCESS_CONTROL_REQUEST_METHOD)?;
        let mut response = Response::new(Body::default());
        *response.status_mut() = StatusCode::OK;
        if let Some(allow) = self.allow(origin) {
            let h = response.headers_mut();
            self.origin_headers(h, allow);
            h.insert(header::ACCESS_CONTROL_ALLOW_METHODS, HeaderValue::from_static(METHODS));
            let requested = req
                .headers()
                .get(header::ACCESS_CONTROL_REQUEST_HEADERS)
                .and_then(|v| v.to_str().ok())
                .filter(|v| !v.trim().is_empty());
            let headers = match requested {
                Some(r) => format!("Authorization, {r}"),
                None => "Authorization".to_owned(),
            };
            if let Ok(v) = HeaderValue::from_str(&headers) {
                h.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, v);
            }
            h.insert(header::ACCESS_CONTROL_MAX_AGE, HeaderValue::from_static(MAX_AGE));
        }
        Some(response)
    }

    /// Adds the CORS headers of an actual (non-preflight) request from `origin`.
    pub fn decorate(&self, origin: Option<&HeaderValue>, response: &mut Response<Body>) {
        let Some(allow) = origin.and_then(|o| self.allow(o)) else { return };
        let h = response.headers_mut();
        self.origin_headers(h, allow);
        h.insert(header::ACCESS_CONTROL_EXPOSE_HEADERS, HeaderValue::from_static(EXPOSED));
    }

    fn origin_headers(&self, h: &mut HeaderMap, allow: HeaderValue) {
        h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, allow);
        if self.allowed.is_some() {
            h.insert(header::ACCESS_CONTROL_ALLOW_CREDENTIALS, HeaderValue::from_static("true"));
            h.append(header::VARY, HeaderValue::from_static("Origin"));
        }
    }
}
