//! What the pipeline needs from the raw HTTP request: method, path, query string and headers.

use http::request::Parts;
use rowgate_request::{ApiRequest, Method};

use crate::backend::RequestInfo;
use crate::error::{code, Error};

/// The parts of an HTTP request the pipeline reads.
pub struct RequestContext<'r> {
    method: Method,
    method_name: &'r str,
    path: &'r str,
    query: &'r str,
    headers: Vec<(&'r str, &'r str)>,
}

impl<'r> RequestContext<'r> {
    /// Borrows what the pipeline needs; headers whose values are not text are an error.
    pub fn new(req: &'r Parts) -> Result<Self, Error> {
        let method = match req.method {
            http::Method::GET => Method::Get,
            http::Method::HEAD => Method::Head,
            http::Method::POST => Method::Post,
            http::Method::PATCH => Method::Patch,
            http::Method::PUT => Method::Put,
            http::Method::DELETE => Method::Delete,
            http::Method::OPTIONS => Method::Options,
            _ => {
                return Err(Error::api(
                    code::UNSUPPORTED_METHOD,
                    format!("Unsupported HTTP method: {}", req.method),
                ))
            }
        };
        let mut headers = Vec::with_capacity(req.headers.len());
        for (name, value) in &req.headers {
            let value = value.to_str().map_err(|_| {
                Error::api(code::PARSE, format!("The value of header {name} is not valid text"))
            })?;
            headers.push((name.as_str(), value));
        }
        Ok(RequestContext {
            method,
            method_name: req.method.as_str(),
            path: req.uri.path(),
            query: req.uri.query().unwrap_or(""),
            headers,
        })
    }

    /// Parses the request (the request stage).
    pub fn parse(&self) -> Result<ApiRequest, Error> {
        Ok(rowgate_request::parse(self.method, self.path, self.query, &self.headers)?)
    }

    /// The request as a backend sees it.
    pub fn info(&self) -> RequestInfo<'_> {
        RequestInfo { method: self.method_name, path: self.path, headers: &self.headers }
    }
}
