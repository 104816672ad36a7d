//! `jwt-*`: how bearer tokens are verified — the secret or keys (`jwt-secret`, PostgREST's
//! forms), the audience, where the role is in the claims, a JWKS URL kept fresh — and the HMAC
//! key rowgate signs its own tokens and signed URLs with, when the secret is one.

use std::net::IpAddr;
use std::time::Duration;

use super::role_path::RolePath;
use super::{either, invalid, jwt_secret, ConfigError, ServeArgs};

/// How bearer tokens are verified (`jwt-*`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct JwtSettings {
    /// `jwt-secret`, read from its file if given as `@file` (checked to parse as keys).
    pub secret: Option<String>,
    /// `jwt-secret-is-base64`.
    pub secret_is_base64: bool,
    /// `jwt-aud`.
    pub aud: Option<String>,
    /// `jwt-role-claim-key`, parsed.
    pub role_claim_key: RolePath,
    /// `jwt-cache-max-entries`.
    pub cache_max_entries: u64,
    /// `jwt-jwks-url`.
    pub jwks_url: Option<String>,
    /// `jwt-jwks-refresh`.
    pub jwks_refresh: Duration,
}

impl JwtSettings {
    /// The settings from the flags and variables `a`, then the file `f`, then the defaults.
    pub(super) fn from_args(a: &ServeArgs, f: &ServeArgs) -> Result<JwtSettings, ConfigError> {
        let secret_is_base64 = a.jwt_secret_is_base64.or(f.jwt_secret_is_base64).unwrap_or(false);
        let secret = match a.jwt_secret.as_deref().or(f.jwt_secret.as_deref()).filter(|s| !s.is_empty()) {
            Some(value) => {
                let secret = jwt_secret::read_value(value).map_err(|e| invalid("jwt-secret", e))?;
                jwt_secret::parse(&secret, secret_is_base64).map_err(|e| invalid("jwt-secret", e))?;
                Some(secret)
            }
            None => None,
        };
        let role_claim_key = match a.jwt_role_claim_key.as_deref().or(f.jwt_role_claim_key.as_deref()) {
            Some(path) => RolePath::parse(path).map_err(|e| invalid("jwt-role-claim-key", e))?,
            None => RolePath::default(),
        };
        let allow_http = a.jwt_jwks_allow_http.or(f.jwt_jwks_allow_http).unwrap_or(false);
        Ok(JwtSettings {
            secret,
            secret_is_base64,
            aud: either(&a.jwt_aud, &f.jwt_aud).filter(|s| !s.is_empty()),
            role_claim_key,
            cache_max_entries: a.jwt_cache_max_entries.or(f.jwt_cache_max_entries).unwrap_or(1000),
            jwks_url: match either(&a.jwt_jwks_url, &f.jwt_jwks_url).filter(|u| !u.is_empty()) {
                Some(u) => Some(jwks_url(u, allow_http)?),
                None => None,
            },
            jwks_refresh: Duration::from_secs(
                a.jwt_jwks_refresh.or(f.jwt_jwks_refresh).unwrap_or(300).max(10),
            ),
        })
    }

    /// The HMAC key of `jwt-secret` (rowgate signs accounts' tokens and storage's signed URLs
    /// with it), if it is one.
    pub fn hmac_secret(&self) -> Option<Vec<u8>> {
        let secret = self.secret.as_deref().filter(|s| is_hmac(s))?;
        Some(match self.secret_is_base64 {
            // Validated when the configuration was loaded.
            true => jwt_secret::decode_base64(secret).unwrap_or_default(),
            false => secret.as_bytes().to_vec(),
        })
    }
}

/// `jwt-jwks-url`, checked: an https URL, or plain http to this machine (or anywhere with
/// `jwt-jwks-allow-http`) — keys fetched in the clear could be anyone's.
fn jwks_url(url: String, allow_http: bool) -> Result<String, ConfigError> {
    let uri: http::Uri = url.parse().map_err(|_| invalid("jwt-jwks-url", format!("{url:?} is not a URL")))?;
    let loopback = matches!(uri.host(), Some("localhost" | "[::1]"))
        || uri.host().and_then(|h| h.parse::<IpAddr>().ok()).is_some_and(|ip| ip.is_loopback());
    match uri.scheme_str() {
        Some("https") => Ok(url),
        Some("http") if loopback || allow_http => Ok(url),
        Some("http") => Err(invalid(
            "jwt-jwks-url",
            format!(
                "{url:?} is plain http: use https, or set jwt-jwks-allow-http to fetch keys in the clear"
            ),
        )),
        _ => Err(invalid("jwt-jwks-url", format!("{url:?} is not an http(s) URL"))),
    }
}

/// Whether a `jwt-secret` is an HMAC secret (not a JWK, JWKS or PEM key).
fn is_hmac(secret: &str) -> bool {
    !secret.trim_start().starts_with('{') && !secret.contains("-----BEGIN")
}
