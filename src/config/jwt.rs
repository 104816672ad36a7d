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

    /// On an SQLite file with neither `jwt-secret` nor `jwt-jwks-url`, a secret of the file's
    /// own, kept beside it (`app.db` → `app.jwt-secret`, readable by its owner only) and made at
    /// the first start: with no configuration, tokens can be signed and verified — a
    /// superuser's, the accounts' once enabled — as PocketBase keeps its secrets in its data
    /// directory. Whoever may read the file may read the data anyway.
    pub(super) fn default_for_file(&mut self, database: &std::path::Path) -> Result<(), ConfigError> {
        if self.secret.is_some() || self.jwks_url.is_some() {
            return Ok(());
        }
        let path = database.with_extension("jwt-secret");
        let kept = |e: std::io::Error| {
            invalid("jwt-secret", format!("none is given, and none could be kept at {}: {e}", path.display()))
        };
        let secret = match std::fs::read_to_string(&path) {
            Ok(s) => s.trim().to_owned(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                use base64::Engine;
                let made =
                    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(crate::random_bytes::<48>());
                // Written whole under another name, then linked into place: a process starting
                // at the same moment reads one secret or the other, never half of one.
                let draft =
                    path.with_extension(format!("jwt-secret.{}", crate::hex(&crate::random_bytes::<6>())));
                let mut options = std::fs::OpenOptions::new();
                options.write(true).create_new(true);
                #[cfg(unix)]
                std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
                let written = options.open(&draft).and_then(|mut f| {
                    std::io::Write::write_all(&mut f, made.as_bytes()).and_then(|()| f.sync_all())
                });
                let linked = written.and_then(|()| std::fs::hard_link(&draft, &path));
                let _ = std::fs::remove_file(&draft);
                match linked {
                    // Another process made it first: theirs is the file's.
                    Ok(()) => made,
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                        std::fs::read_to_string(&path).map_err(kept)?.trim().to_owned()
                    }
                    // A directory rowgate may not write (a file served read-only): no secret,
                    // as when there was no such default.
                    Err(e)
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::ReadOnlyFilesystem
                        ) =>
                    {
                        return Ok(())
                    }
                    Err(e) => return Err(kept(e)),
                }
            }
            Err(e) => return Err(kept(e)),
        };
        jwt_secret::parse(&secret, false)
            .map_err(|e| invalid("jwt-secret", format!("{}: {e}", path.display())))?;
        self.secret = Some(secret);
        self.secret_is_base64 = false;
        Ok(())
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
