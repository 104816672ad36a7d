//! `api-key-*`: where requests carry their API key, whether one is required, which roles a
//! JWT sent as the key may carry, and how many verified keys are remembered.

use super::{invalid, list, ConfigError, ServeArgs};

/// How API keys are read and checked (`api-key-*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKeySettings {
    /// `api-key-headers`, lower-cased.
    pub headers: Vec<http::HeaderName>,
    /// `api-key-required`.
    pub required: bool,
    /// `api-key-jwt-roles`: `None` for any role but `authenticated`, `Some(["*"])` for any.
    pub jwt_roles: Option<Vec<String>>,
    /// `api-key-cache-max-entries`.
    pub cache_max_entries: u64,
}

impl ApiKeySettings {
    /// The settings from the flags and variables `a`, then the file `f`, then the defaults.
    pub(super) fn from_args(a: &ServeArgs, f: &ServeArgs) -> Result<ApiKeySettings, ConfigError> {
        let headers = list(
            a.api_key_headers.as_deref().or(f.api_key_headers.as_deref()).unwrap_or("apikey, x-api-key"),
        )
        .into_iter()
        .map(|h| {
            http::HeaderName::from_bytes(h.to_ascii_lowercase().as_bytes())
                .map_err(|_| invalid("api-key-headers", format!("{h:?} is not a header name")))
        })
        .collect::<Result<Vec<_>, _>>()?;
        Ok(ApiKeySettings {
            headers,
            required: a.api_key_required.or(f.api_key_required).unwrap_or(false),
            jwt_roles: a.api_key_jwt_roles.as_deref().or(f.api_key_jwt_roles.as_deref()).map(list),
            cache_max_entries: a.api_key_cache_max_entries.or(f.api_key_cache_max_entries).unwrap_or(10_000),
        })
    }

    /// Whether a JWT sent as the API key may carry `role` (`api-key-jwt-roles`).
    pub fn jwt_role(&self, role: &str) -> bool {
        match &self.jwt_roles {
            None => role != "authenticated",
            Some(roles) => roles.iter().any(|r| r == "*" || r == role),
        }
    }
}
