//! What the pipeline needs from the raw HTTP request: method, path, query string and headers,
//! and the session settings (`request.*`, role, search_path) the request runs with.

use http::request::Parts;
use rowgate_request::{ApiRequest, Method};
use serde_json::{Map, Value};

use crate::auth::Principal;
use crate::backend::postgres::sql::push_ident;
use crate::backend::postgres::{SessionSettings, Setting};
use crate::config::Config;
use crate::error::{code, Error};

/// The parts of an HTTP request the pipeline reads.
pub struct RequestContext<'r> {
    method: Method,
    method_name: &'r str,
    path: &'r str,
    query: &'r str,
    headers: Vec<(&'r str, &'r str)>,
    config: &'r Config,
}

impl<'r> RequestContext<'r> {
    /// Borrows what the pipeline needs; headers whose values are not text are an error.
    pub fn new(req: &'r Parts, config: &'r Config) -> Result<Self, Error> {
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
            config,
        })
    }

    /// Parses the request (the request stage).
    pub fn parse(&self) -> Result<ApiRequest, Error> {
        Ok(rowgate_request::parse(self.method, self.path, self.query, &self.headers)?)
    }

    /// The session settings for a request in `schema` by `principal`, in `timezone` if given.
    pub fn session_settings(
        &self,
        schema: &str,
        principal: &Principal,
        timezone: Option<&str>,
    ) -> SessionSettings {
        let mut s = SessionSettings::default();
        let mut search_path = String::new();
        for (i, name) in std::iter::once(schema)
            .chain(self.config.db_extra_search_path.iter().map(String::as_str))
            .enumerate()
        {
            if i > 0 {
                search_path.push_str(", ");
            }
            push_ident(&mut search_path, name);
        }
        s.set(Setting::SearchPath, search_path);
        let read_only = matches!(self.method, Method::Get | Method::Head);
        s.set(Setting::ReadOnly, if read_only { "on" } else { "off" }.into());
        s.set(Setting::JwtClaims, principal.claims.to_string());
        s.set(Setting::Method, self.method_name.into());
        s.set(Setting::Path, self.path.into());
        let mut headers = Map::new();
        let mut cookies = Map::new();
        for (name, value) in &self.headers {
            if *name == "cookie" {
                for pair in value.split(';') {
                    if let Some((k, v)) = pair.split_once('=') {
                        cookies.insert(k.trim().into(), Value::String(v.trim().into()));
                    }
                }
            } else {
                headers.insert((*name).into(), Value::String((*value).into()));
            }
        }
        s.set(Setting::Headers, Value::Object(headers).to_string());
        s.set(Setting::Cookies, Value::Object(cookies).to_string());
        s.set(Setting::Role, principal.role.to_string());
        if let Some(tz) = timezone {
            s.set(Setting::TimeZone, tz.to_owned());
        }
        s
    }
}
