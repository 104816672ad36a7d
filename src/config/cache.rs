//! `cache-*`: the response cache, its bounds, the routes it serves and the `Cache-Control` it
//! gives them.

use std::time::Duration;

use super::{invalid, list, ConfigError, ServeArgs};

/// How the response cache runs (`cache-*`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CacheSettings {
    /// `cache-enabled`.
    pub enabled: bool,
    /// `cache-max-bytes`: what the stored answers may take.
    pub max_bytes: u64,
    /// `cache-ttl`: how long an answer is kept at most (none: until a change invalidates it).
    pub ttl: Option<Duration>,
    /// `cache-routes`: the routes cached (none: every route).
    pub routes: Option<Vec<String>>,
    /// `cache-key-claims`: the claims that key a cached answer beside the role (none: all).
    pub key_claims: Option<Vec<String>>,
    /// `cache-control`: the `Cache-Control` of a route's answers (`*`: every route's).
    pub control: Vec<(String, http::HeaderValue)>,
}

impl CacheSettings {
    /// The settings from the flags and variables `a`, then the file `f`, then the defaults.
    pub(super) fn from_args(a: &ServeArgs, f: &ServeArgs) -> Result<CacheSettings, ConfigError> {
        let mut control = Vec::new();
        for rule in a.cache_control.as_deref().or(f.cache_control.as_deref()).unwrap_or("").split(';') {
            if rule.trim().is_empty() {
                continue;
            }
            let (route, value) = rule
                .split_once(':')
                .ok_or_else(|| invalid("cache-control", format!("{rule:?} is not `route: value`")))?;
            let value = http::HeaderValue::from_str(value.trim())
                .map_err(|_| invalid("cache-control", format!("{:?} is not a header value", value.trim())))?;
            control.push((route.trim().to_owned(), value));
        }
        Ok(CacheSettings {
            enabled: a.cache_enabled.or(f.cache_enabled).unwrap_or(false),
            max_bytes: a.cache_max_bytes.or(f.cache_max_bytes).unwrap_or(64 * 1024 * 1024),
            ttl: a.cache_ttl.or(f.cache_ttl).filter(|s| *s > 0).map(Duration::from_secs),
            routes: a.cache_routes.as_deref().or(f.cache_routes.as_deref()).map(list),
            key_claims: a.cache_key_claims.as_deref().or(f.cache_key_claims.as_deref()).map(list),
            control,
        })
    }
}
