//! `openapi-*` and `api-docs-enabled`: how the API describes itself at `GET /`, and whether
//! its reference page is served.

use super::{invalid, ConfigError, OpenApiMode, OpenApiVersion, ProxyUri, ServeArgs};

/// How the API describes itself (`openapi-*`, `api-docs-enabled`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OpenApiSettings {
    /// `openapi-mode`.
    pub mode: OpenApiMode,
    /// `openapi-security-active`.
    pub security_active: bool,
    /// `openapi-server-proxy-uri`, checked.
    pub server_proxy_uri: Option<ProxyUri>,
    /// `openapi-version`.
    pub version: OpenApiVersion,
    /// `api-docs-enabled`.
    pub docs_enabled: bool,
}

impl OpenApiSettings {
    /// The settings from the flags and variables `a`, then the file `f`, then the defaults.
    pub(super) fn from_args(a: &ServeArgs, f: &ServeArgs) -> Result<OpenApiSettings, ConfigError> {
        Ok(OpenApiSettings {
            mode: a.openapi_mode.or(f.openapi_mode).unwrap_or_default(),
            security_active: a.openapi_security_active.or(f.openapi_security_active).unwrap_or(false),
            server_proxy_uri: match a
                .openapi_server_proxy_uri
                .as_deref()
                .or(f.openapi_server_proxy_uri.as_deref())
            {
                Some(u) if !u.is_empty() => {
                    Some(ProxyUri::parse(u).map_err(|e| invalid("openapi-server-proxy-uri", e))?)
                }
                _ => None,
            },
            version: a.openapi_version.or(f.openapi_version).unwrap_or_default(),
            docs_enabled: a.api_docs_enabled.or(f.api_docs_enabled).unwrap_or(false),
        })
    }
}
