//! Session settings a request needs, and what a pooled connection already holds.

use serde_json::{Map, Value};

use crate::backend::{push_ident, Caller};
use crate::config::Config;

/// The settings rowgate manages on every connection, in the order they are applied. `role`
/// comes last so the others are set by the authenticator, as PostgREST sets them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setting {
    /// `search_path`: the request's schema, then `db-extra-search-path`.
    SearchPath,
    /// `default_transaction_read_only`: `on` for GET and HEAD.
    ReadOnly,
    /// `request.jwt.claims`: the caller's claims as JSON.
    JwtClaims,
    /// `request.method`.
    Method,
    /// `request.path`.
    Path,
    /// `request.headers`: the request headers as a JSON object with lower-case names.
    Headers,
    /// `request.cookies`: the cookies as a JSON object.
    Cookies,
    /// `timezone`: `Prefer: timezone=`, or the connection's own default.
    TimeZone,
    /// `role`: the role the request runs as.
    Role,
}

impl Setting {
    /// All settings, in application order.
    pub const ALL: [Setting; 9] = [
        Setting::SearchPath,
        Setting::ReadOnly,
        Setting::JwtClaims,
        Setting::Method,
        Setting::Path,
        Setting::Headers,
        Setting::Cookies,
        Setting::TimeZone,
        Setting::Role,
    ];

    /// The PostgreSQL parameter name.
    pub fn name(self) -> &'static str {
        match self {
            Setting::SearchPath => "search_path",
            Setting::ReadOnly => "default_transaction_read_only",
            Setting::JwtClaims => "request.jwt.claims",
            Setting::Method => "request.method",
            Setting::Path => "request.path",
            Setting::Headers => "request.headers",
            Setting::Cookies => "request.cookies",
            Setting::TimeZone => "timezone",
            Setting::Role => "role",
        }
    }
}

/// Values of every [`Setting`]; `None` means unknown (a new or reset connection).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionSettings {
    values: [Option<String>; 9],
}

impl SessionSettings {
    /// The settings a request by `caller` runs with in `schema`, in `timezone` if given: the
    /// role and claims, `request.*` (method, path, headers, cookies), the search path, and
    /// read-only mode for GET and HEAD.
    pub fn of_request(config: &Config, caller: &Caller<'_>, schema: &str, timezone: Option<&str>) -> Self {
        let mut s = SessionSettings::default();
        let mut search_path = String::new();
        for (i, name) in
            std::iter::once(schema).chain(config.db.extra_search_path.iter().map(String::as_str)).enumerate()
        {
            if i > 0 {
                search_path.push_str(", ");
            }
            push_ident(&mut search_path, name);
        }
        s.set(Setting::SearchPath, search_path);
        let read_only = matches!(caller.request.method, "GET" | "HEAD");
        s.set(Setting::ReadOnly, if read_only { "on" } else { "off" }.into());
        s.set(Setting::JwtClaims, caller.principal.claims.to_string());
        s.set(Setting::Method, caller.request.method.into());
        s.set(Setting::Path, caller.request.path.into());
        let mut headers = Map::new();
        let mut cookies = Map::new();
        for (name, value) in caller.request.headers {
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
        s.set(Setting::Role, caller.principal.role.to_string());
        if let Some(tz) = timezone {
            s.set(Setting::TimeZone, tz.to_owned());
        }
        s
    }

    /// Sets one value.
    pub fn set(&mut self, setting: Setting, value: String) {
        self.values[setting as usize] = Some(value);
    }

    /// One value, if known.
    pub fn get(&self, setting: Setting) -> Option<&str> {
        self.values[setting as usize].as_deref()
    }

    /// Forgets every value, so the next request sets all of them.
    pub fn forget(&mut self) {
        *self = SessionSettings::default();
    }

    /// The (name, value) pairs of `wanted` that this connection does not hold, in order.
    /// A setting `wanted` leaves unset takes its value from `defaults`, so nothing a previous
    /// request set survives into a request that did not ask for it.
    pub fn differing<'a>(
        &self,
        wanted: &'a SessionSettings,
        defaults: &'a SessionSettings,
    ) -> Vec<(&'static str, &'a str)> {
        Setting::ALL
            .iter()
            .filter_map(|&s| {
                let want = wanted.get(s).or_else(|| defaults.get(s))?;
                (self.get(s) != Some(want)).then_some((s.name(), want))
            })
            .collect()
    }

    /// `wanted` with the settings it leaves unset taken from `defaults`.
    pub fn merged(wanted: &SessionSettings, defaults: &SessionSettings) -> SessionSettings {
        let mut out = wanted.clone();
        for (v, d) in out.values.iter_mut().zip(&defaults.values) {
            if v.is_none() {
                v.clone_from(d);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_differences_are_sent() {
        let mut held = SessionSettings::default();
        held.set(Setting::Role, "web_anon".into());
        held.set(Setting::Method, "GET".into());
        let mut wanted = held.clone();
        wanted.set(Setting::Path, "/items".into());
        wanted.set(Setting::Role, "web_user".into());
        let none = SessionSettings::default();
        assert_eq!(held.differing(&wanted, &none), vec![("request.path", "/items"), ("role", "web_user")]);
        assert!(wanted.differing(&wanted, &none).is_empty());
    }

    #[test]
    fn unset_settings_return_to_defaults() {
        let mut held = SessionSettings::default();
        held.set(Setting::TimeZone, "America/Sao_Paulo".into());
        let mut defaults = SessionSettings::default();
        defaults.set(Setting::TimeZone, "UTC".into());
        assert_eq!(held.differing(&SessionSettings::default(), &defaults), vec![("timezone", "UTC")]);
    }
}
